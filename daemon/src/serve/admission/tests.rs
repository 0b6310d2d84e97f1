//! Unit tests of `serve::admission`: the cap, the choice at the cap
//! (crowds, silence, the fresh grace) and the bound on waiting.

use super::*;

/// Graces of `fresh` (and the real auth grace).
fn graces(fresh: Duration) -> Graces {
    Graces {
        auth: AUTH_GRACE,
        fresh,
    }
}

fn yes_from(a: &Arc<Admission>, peer: Option<i32>) -> Ticket {
    match poll_once(a.admit(peer, || true)) {
        Some(Admitted::Yes(t)) => t,
        Some(Admitted::Full | Admitted::Crowded) => panic!("refused"),
        None => panic!("still waiting"),
    }
}

fn yes(a: &Arc<Admission>) -> Ticket {
    yes_from(a, None)
}

/// `n` connections of process `pid`.
fn crowd(a: &Arc<Admission>, pid: i32, n: usize) -> Vec<Ticket> {
    (0..n).map(|_| yes_from(a, Some(pid))).collect()
}

/// Which of `tickets` were told to make room.
fn told(tickets: &[Ticket]) -> Vec<usize> {
    (0..tickets.len())
        .filter(|&i| poll_once(tickets[i].evicted()).is_some())
        .collect()
}

#[test]
fn the_cap_keeps_a_reserve_of_descriptors() {
    assert_eq!(connection_cap(1024), 768);
    assert_eq!(connection_cap(512), 384);
    assert_eq!(connection_cap(65536), 49152);
    assert_eq!(connection_cap(100), 16);
}

#[test]
fn at_the_cap_the_oldest_unauthenticated_connection_makes_room() {
    let a = Admission::new(3, graces(Duration::ZERO));
    let mut owner = yes(&a);
    owner.authenticate();
    let first = yes(&a);
    let second = yes(&a);
    assert_eq!(a.open(), 3);
    // At the cap: `first` is told to go, and the newcomer takes its
    // place while it closes.
    let third = yes(&a);
    assert!(poll_once(first.evicted()).is_some());
    assert!(poll_once(second.evicted()).is_none());
    assert!(poll_once(owner.evicted()).is_none());
    assert_eq!(a.open(), 4, "the one told to go is still closing");
    drop(first);
    assert_eq!(a.open(), 3);
    drop((second, third, owner));
    assert_eq!(a.open(), 0);
}

#[test]
fn authenticated_connections_are_never_evicted() {
    let a = Admission::new(2, graces(Duration::ZERO));
    let mut x = yes(&a);
    let mut y = yes(&a);
    x.authenticate();
    y.authenticate();
    assert!(matches!(poll_once(a.admit(None, || true)), Some(Admitted::Full)));
    drop(x);
    let z = yes(&a);
    assert_eq!(a.open(), 2);
    drop((y, z));
    assert_eq!(a.open(), 0);
}

#[test]
fn the_longest_silent_connection_goes_first() {
    let a = Admission::new(2, graces(Duration::ZERO));
    let older = yes(&a);
    let newer = yes(&a);
    // The older one sends a line (without the token) after the newer
    // one was admitted: the newer one has been silent longer.
    older.heard();
    let third = yes(&a);
    assert!(poll_once(newer.evicted()).is_some(), "the silent one goes");
    assert!(poll_once(older.evicted()).is_none());
    drop((newer, older, third));
}

/// Connections told to go may close late; past [`LEAVING_MAX`] of
/// them an admission waits until one has closed.
#[test]
fn at_most_leaving_max_connections_close_behind_the_cap() {
    let a = Admission::new(4, graces(Duration::ZERO));
    let mut kept: Vec<Ticket> = (0..4 + LEAVING_MAX).map(|_| yes(&a)).collect();
    assert_eq!(a.open(), 4 + LEAVING_MAX);
    {
        let mut admitting = std::pin::pin!(a.admit(None, || true));
        assert!(poll_once(admitting.as_mut()).is_none(), "waits for a close");
        let gone = kept.remove(0);
        assert!(poll_once(gone.evicted()).is_some());
        drop(gone);
        match poll_once(admitting.as_mut()) {
            Some(Admitted::Yes(t)) => kept.push(t),
            _ => panic!("a close made room"),
        }
    }
    assert_eq!(a.open(), 4 + LEAVING_MAX);
    drop(kept);
    assert_eq!(a.open(), 0);
}

/// Audit N6: while no peer crowds, a connection admitted less than the
/// fresh grace ago is never evicted; the admission waits for the grace
/// (or a place).
#[tokio::test(flavor = "current_thread")]
async fn a_fresh_connection_is_not_evicted() {
    let a = Admission::new(2, graces(Duration::from_millis(300)));
    let first = yes(&a);
    let second = yes(&a);
    let waited = tokio::time::timeout(Duration::from_millis(100), a.admit(None, || true)).await;
    assert!(waited.is_err(), "no room made within the grace");
    assert!(poll_once(first.evicted()).is_none());
    assert!(poll_once(second.evicted()).is_none());
    // Past the grace the oldest silent one makes room.
    let third = match tokio::time::timeout(Duration::from_secs(5), a.admit(None, || true)).await {
        Ok(Admitted::Yes(t)) => t,
        _ => panic!("admitted once the grace is over"),
    };
    assert!(poll_once(first.evicted()).is_some());
    assert!(poll_once(second.evicted()).is_none());
    drop((first, second, third));
    assert_eq!(a.open(), 0);
}

/// Issue 44 item 7: every place is held by one process's fresh
/// connections; a process holding none takes the place of the crowd's
/// connection silent longest at once, grace or no grace.
#[test]
fn a_peer_with_none_takes_a_crowds_place_however_fresh() {
    let a = Admission::new(PEER_CROWD + 1, graces(Duration::from_secs(3600)));
    let flood = crowd(&a, 7, PEER_CROWD + 1);
    flood[0].heard();
    let client = yes_from(&a, Some(8));
    assert_eq!(client.peer(), Some(8));
    assert_eq!(told(&flood), [1], "the silent longest; the one that spoke comes last");
    let another = yes_from(&a, Some(9));
    assert_eq!(told(&flood), [2]);
    drop((flood, client, another));
    assert_eq!(a.open(), 0);
}

/// A crowd's own newcomer takes a place of its own crowd, never a
/// lighter peer's, and never waits (the backlog behind it moves).
#[test]
fn a_crowds_newcomer_takes_a_place_of_its_own() {
    let a = Admission::new(PEER_CROWD + 1, graces(Duration::from_secs(3600)));
    let other = yes_from(&a, Some(8));
    let flood = crowd(&a, 7, PEER_CROWD);
    let newcomer = yes_from(&a, Some(7));
    assert!(poll_once(other.evicted()).is_none(), "the lighter peer keeps its place");
    assert_eq!(told(&flood), [0]);
    drop((flood, other, newcomer));
    assert_eq!(a.open(), 0);
}

/// In the middle of its own burst, a crowd's silent newcomer is
/// closed at once; one with a line waiting (or the last of the burst)
/// takes a place of its own crowd. Past the grace nobody is asked.
#[test]
fn a_bursting_crowds_silent_newcomer_is_closed_at_once() {
    let a = Admission::new(PEER_CROWD + 1, graces(Duration::from_secs(3600)));
    let flood = crowd(&a, 7, PEER_CROWD + 1);
    assert!(matches!(poll_once(a.admit(Some(7), || false)), Some(Admitted::Crowded)));
    assert!(told(&flood).is_empty());
    let talking = yes_from(&a, Some(7));
    assert_eq!(told(&flood), [0]);
    drop((flood, talking));
    let ripe = Admission::new(PEER_CROWD + 1, graces(Duration::ZERO));
    let flood = crowd(&ripe, 7, PEER_CROWD + 1);
    let asked = std::cell::Cell::new(false);
    match poll_once(ripe.admit(Some(7), || asked.replace(true))) {
        Some(Admitted::Yes(t)) => drop(t),
        _ => panic!("a place past its grace is taken"),
    }
    assert!(!asked.get());
    drop(flood);
}

/// Two crowds even out: a newcomer of the lighter takes from the
/// heavier, a newcomer of the heavier from its own.
#[test]
fn the_heaviest_crowd_gives_way() {
    let a = Admission::new(16, graces(Duration::from_secs(3600)));
    let heavy = crowd(&a, 1, 10);
    let light = crowd(&a, 2, 6);
    let from_light = yes_from(&a, Some(2));
    assert_eq!((told(&heavy), told(&light)), (vec![0], vec![]));
    // A newcomer of the heavier (9 + 1 against 7) takes from its own.
    let from_heavy = yes_from(&a, Some(1));
    assert_eq!((told(&heavy), told(&light)), (vec![1], vec![]));
    drop((heavy, light, from_light, from_heavy));
    assert_eq!(a.open(), 0);
}

/// Below a crowd the grace holds for everyone: with 7 from one peer
/// and one from another, all fresh, a newcomer waits.
#[tokio::test(flavor = "current_thread")]
async fn below_a_crowd_fresh_connections_keep_their_grace() {
    let a = Admission::new(PEER_CROWD, graces(Duration::from_secs(3600)));
    let few = crowd(&a, 1, PEER_CROWD - 1);
    let one = yes_from(&a, Some(2));
    let waited = tokio::time::timeout(Duration::from_millis(50), a.admit(Some(3), || true)).await;
    assert!(waited.is_err(), "no room made within the grace");
    assert!(told(&few).is_empty());
    assert!(poll_once(one.evicted()).is_none());
    drop((few, one));
    assert_eq!(a.open(), 0);
}

/// The rule without a crowd, on its own clock: the one silent longest
/// is fresh, so the one admitted first, which spoke since and is past
/// its grace, goes; once only fresh ones are left, the wait is until
/// the oldest of them is past it.
#[test]
fn one_that_spoke_goes_before_a_fresh_one_is_waited_for() {
    let mut table = Table::with_room_for(4);
    let seats: Vec<Arc<Seat>> = (0..4).map(|_| Arc::new(Seat::default())).collect();
    let first = table.insert(Some(1), 0, seats[0].clone());
    let second = table.insert(Some(2), 100, seats[1].clone());
    table.insert(Some(3), 1500, seats[2].clone());
    table.insert(Some(4), 1600, seats[3].clone());
    // The two admitted first speak after the others were admitted.
    table.heard(second);
    table.heard(first);
    let mut evicted = || match choose(&mut table, 1700, 1000, Some(9), false) {
        AtCap::Evict { seat, gave_way: None } => seats.iter().position(|s| Arc::ptr_eq(s, &seat)),
        AtCap::WaitUntil(at) => panic!("waited until {at}"),
        _ => panic!("no eviction"),
    };
    assert_eq!(evicted(), Some(0), "admitted first, past its grace");
    assert_eq!(evicted(), Some(1));
    assert!(matches!(
        choose(&mut table, 1700, 1000, Some(9), false),
        AtCap::WaitUntil(2500)
    ));
}

/// The bound the module states: once the loop waited for a grace,
/// every connection is past it, and the next admissions take their
/// places at once, however the connections already there keep
/// speaking (they used to make each admission wait for the newest
/// one's grace).
#[tokio::test(flavor = "current_thread")]
async fn a_chatty_flood_makes_admissions_wait_once_not_each_time() {
    let a = Admission::new(4, graces(Duration::from_millis(200)));
    let flood: Vec<Ticket> = (1..=4).map(|pid| yes_from(&a, Some(pid))).collect();
    let first = match tokio::time::timeout(Duration::from_secs(5), a.admit(Some(10), || true)).await {
        Ok(Admitted::Yes(t)) => t,
        _ => panic!("admitted once the grace is over"),
    };
    let mut newcomers = vec![first];
    for pid in 11..14 {
        // Everyone already there speaks after the newest arrived.
        for t in &flood {
            t.heard();
        }
        newcomers.push(yes_from(&a, Some(pid)));
    }
    assert_eq!(told(&flood), [0, 1, 2, 3]);
    assert!(told(&newcomers).is_empty());
    drop((flood, newcomers));
    assert_eq!(a.open(), 0);
}

/// Polls a future once without a runtime.
fn poll_once<F: std::future::Future>(fut: F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

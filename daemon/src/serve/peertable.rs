//! The table of connections without the token, as admission reads it:
//! the order in which they fell silent (overall, and within each peer
//! process), how many each peer holds, and which peer holds the most.
//!
//! The policy that reads it lives in [`crate::serve::admission`]; this
//! module only keeps the books. Every operation is O(1): one hash lookup
//! of the peer's pid, the rest linked lists threaded through two slabs
//! (one slot per connection, one per peer) and a count-indexed list of
//! peers ("buckets", as in an O(1) LFU cache), so the peer holding the
//! most is the head of the highest non-empty bucket. The slabs, the pid
//! map and the buckets grow only to the most connections held at once,
//! which admission bounds by its cap, and are reused after: past that
//! high-water mark nothing here allocates.
//!
//! Both silence orders are kept by appending: a connection joins the tail
//! when it is admitted and moves there when it sends a line, so the head
//! of a list is the connection silent longest (ties: the one admitted
//! first) without a clock being compared. A third list keeps the order of
//! admission alone (a line does not move a connection in it): its head is
//! the connection admitted first.

use std::collections::HashMap;

/// The end of a list.
const NIL: u32 = u32::MAX;

/// A node's neighbours in one list.
#[derive(Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
}

const UNLINKED: Link = Link { prev: NIL, next: NIL };

/// The first and last node of one list.
#[derive(Clone, Copy)]
struct Ends {
    head: u32,
    tail: u32,
}

const EMPTY: Ends = Ends { head: NIL, tail: NIL };

/// Appends node `at` to the list `ends` threaded through `nodes` by
/// `link`.
fn push_back<N>(nodes: &mut [N], ends: &mut Ends, at: u32, link: fn(&mut N) -> &mut Link) {
    *link(&mut nodes[at as usize]) = Link {
        prev: ends.tail,
        next: NIL,
    };
    match ends.tail {
        NIL => ends.head = at,
        tail => link(&mut nodes[tail as usize]).next = at,
    }
    ends.tail = at;
}

/// Takes node `at` out of the list `ends`.
fn unlink<N>(nodes: &mut [N], ends: &mut Ends, at: u32, link: fn(&mut N) -> &mut Link) {
    let Link { prev, next } = std::mem::replace(link(&mut nodes[at as usize]), UNLINKED);
    match prev {
        NIL => ends.head = next,
        p => link(&mut nodes[p as usize]).next = next,
    }
    match next {
        NIL => ends.tail = prev,
        n => link(&mut nodes[n as usize]).prev = prev,
    }
}

/// One connection without the token: where it is in the table. Copy it
/// freely; once the connection leaves the table the handle matches
/// nothing, even after its slot is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle {
    slot: u32,
    id: u64,
}

/// A peer's place in the table (valid until its last connection leaves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerRef(u32);

struct Conn<T> {
    /// 0 while the slot is free.
    id: u64,
    peer: u32,
    /// When it was admitted, on the caller's clock.
    admitted: u64,
    /// In the order of silence, overall (free slots: the free list).
    all: Link,
    /// In the order of silence among its peer's connections.
    mine: Link,
    /// In the order of admission.
    born: Link,
    payload: Option<T>,
}

struct Peer {
    /// The pid, or 0 for connections whose peer the kernel did not name.
    pid: i32,
    holds: u32,
    conns: Ends,
    /// In the bucket of peers holding as many (free slots: the free list).
    rank: Link,
}

/// The table; `T` is what each connection leaves behind when it is taken
/// out (admission keeps the connection's eviction signal there).
pub(crate) struct PeerTable<T> {
    conns: Vec<Conn<T>>,
    free_conns: u32,
    peers: Vec<Peer>,
    free_peers: u32,
    by_pid: HashMap<i32, u32>,
    /// `buckets[n]`: the peers holding `n` connections (`[0]` unused).
    buckets: Vec<Ends>,
    /// The most connections one peer holds (0: the table is empty).
    top: u32,
    /// Every connection, silent longest first.
    silent: Ends,
    /// Every connection, admitted first first.
    admitted: Ends,
    next_id: u64,
}

/// How much room the table takes at once, before it has to grow.
const FIRST_ROOM: usize = 256;

impl<T> PeerTable<T> {
    /// An empty table with room for `min(expected, 256)` connections.
    pub(crate) fn with_room_for(expected: usize) -> PeerTable<T> {
        let room = expected.min(FIRST_ROOM);
        PeerTable {
            conns: Vec::with_capacity(room),
            free_conns: NIL,
            peers: Vec::with_capacity(room),
            free_peers: NIL,
            by_pid: HashMap::with_capacity(room),
            buckets: Vec::with_capacity(room + 1),
            top: 0,
            silent: EMPTY,
            admitted: EMPTY,
            next_id: 0,
        }
    }

    /// Adds a connection of `peer` (`None`: the kernel did not say; all
    /// such connections count as one peer), admitted at `now`, at the tail
    /// of both silence orders.
    pub(crate) fn insert(&mut self, peer: Option<i32>, now: u64, payload: T) -> Handle {
        let p = self.peer_slot(peer.unwrap_or(0));
        self.next_id += 1;
        let id = self.next_id;
        let conn = Conn {
            id,
            peer: p,
            admitted: now,
            all: UNLINKED,
            mine: UNLINKED,
            born: UNLINKED,
            payload: Some(payload),
        };
        let slot = match self.free_conns {
            NIL => {
                self.conns.push(conn);
                (self.conns.len() - 1) as u32
            }
            free => {
                self.free_conns = self.conns[free as usize].all.next;
                self.conns[free as usize] = conn;
                free
            }
        };
        push_back(&mut self.conns, &mut self.silent, slot, |c| &mut c.all);
        push_back(&mut self.conns, &mut self.admitted, slot, |c| &mut c.born);
        push_back(&mut self.conns, &mut self.peers[p as usize].conns, slot, |c| {
            &mut c.mine
        });
        self.rerank(p, true);
        Handle { slot, id }
    }

    /// Takes a connection out; `None` if it already left.
    pub(crate) fn remove(&mut self, h: Handle) -> Option<T> {
        if !self.holds_handle(h) {
            return None;
        }
        let slot = h.slot;
        let p = self.conns[slot as usize].peer;
        unlink(&mut self.conns, &mut self.silent, slot, |c| &mut c.all);
        unlink(&mut self.conns, &mut self.admitted, slot, |c| &mut c.born);
        unlink(&mut self.conns, &mut self.peers[p as usize].conns, slot, |c| {
            &mut c.mine
        });
        self.rerank(p, false);
        let conn = &mut self.conns[slot as usize];
        conn.id = 0;
        conn.all.next = self.free_conns;
        self.free_conns = slot;
        conn.payload.take()
    }

    /// The connection sent a line: it moves to the tail of both silence
    /// orders.
    pub(crate) fn heard(&mut self, h: Handle) {
        if !self.holds_handle(h) {
            return;
        }
        let p = self.conns[h.slot as usize].peer;
        unlink(&mut self.conns, &mut self.silent, h.slot, |c| &mut c.all);
        push_back(&mut self.conns, &mut self.silent, h.slot, |c| &mut c.all);
        let mine = &mut self.peers[p as usize].conns;
        unlink(&mut self.conns, mine, h.slot, |c| &mut c.mine);
        push_back(&mut self.conns, mine, h.slot, |c| &mut c.mine);
    }

    /// The connection silent longest, and when it was admitted.
    pub(crate) fn silent_longest(&self) -> Option<(Handle, u64)> {
        self.handle_at(self.silent.head)
    }

    /// The connection admitted first, and when.
    pub(crate) fn admitted_first(&self) -> Option<(Handle, u64)> {
        self.handle_at(self.admitted.head)
    }

    /// The connection of `peer` silent longest, and when it was admitted.
    pub(crate) fn silent_longest_of(&self, peer: PeerRef) -> Option<(Handle, u64)> {
        let p = self.peers.get(peer.0 as usize)?;
        self.handle_at(p.conns.head)
    }

    /// The peer `pid` names, if it holds a connection here.
    pub(crate) fn peer(&self, pid: Option<i32>) -> Option<PeerRef> {
        self.by_pid.get(&pid.unwrap_or(0)).map(|&p| PeerRef(p))
    }

    /// How many connections `peer` holds.
    pub(crate) fn holds(&self, peer: PeerRef) -> usize {
        self.peers.get(peer.0 as usize).map_or(0, |p| p.holds as usize)
    }

    /// `peer`'s pid (`None`: the peers the kernel did not name).
    pub(crate) fn pid(&self, peer: PeerRef) -> Option<i32> {
        self.peers.get(peer.0 as usize).map(|p| p.pid).filter(|pid| *pid != 0)
    }

    /// A peer holding the most connections (of several, any), and how
    /// many it holds.
    pub(crate) fn heaviest(&self) -> Option<(PeerRef, usize)> {
        let head = self.buckets.get(self.top as usize)?.head;
        (self.top > 0 && head != NIL).then_some((PeerRef(head), self.top as usize))
    }

    fn holds_handle(&self, h: Handle) -> bool {
        self.conns
            .get(h.slot as usize)
            .is_some_and(|c| c.id == h.id && c.id != 0)
    }

    fn handle_at(&self, slot: u32) -> Option<(Handle, u64)> {
        let c = self.conns.get(slot as usize)?;
        Some((Handle { slot, id: c.id }, c.admitted))
    }

    /// The slot of peer `pid`, made if it holds nothing yet.
    fn peer_slot(&mut self, pid: i32) -> u32 {
        if let Some(&p) = self.by_pid.get(&pid) {
            return p;
        }
        let peer = Peer {
            pid,
            holds: 0,
            conns: EMPTY,
            rank: UNLINKED,
        };
        let p = match self.free_peers {
            NIL => {
                self.peers.push(peer);
                (self.peers.len() - 1) as u32
            }
            free => {
                self.free_peers = self.peers[free as usize].rank.next;
                self.peers[free as usize] = peer;
                free
            }
        };
        self.by_pid.insert(pid, p);
        p
    }

    /// Peer `p` holds one more (`up`) or one fewer connection: it moves to
    /// its new bucket, and leaves the table when it holds none.
    fn rerank(&mut self, p: u32, up: bool) {
        let was = self.peers[p as usize].holds;
        if was > 0 {
            unlink(&mut self.peers, &mut self.buckets[was as usize], p, |q| &mut q.rank);
        }
        let now = if up { was + 1 } else { was.saturating_sub(1) };
        self.peers[p as usize].holds = now;
        if now > 0 {
            while self.buckets.len() <= now as usize {
                self.buckets.push(EMPTY);
            }
            push_back(&mut self.peers, &mut self.buckets[now as usize], p, |q| &mut q.rank);
            self.top = self.top.max(now);
        } else {
            let pid = self.peers[p as usize].pid;
            self.by_pid.remove(&pid);
            self.peers[p as usize].rank.next = self.free_peers;
            self.free_peers = p;
        }
        // Counts move by one, so when the top bucket empties the peer that
        // left it is in the one below (or the table is empty).
        if self.buckets.get(self.top as usize).is_some_and(|b| b.head == NIL) {
            self.top = self.top.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handles of `peer`'s connections, silent longest first.
    fn order_of(t: &PeerTable<u32>, pid: Option<i32>) -> Vec<u32> {
        let mut out = Vec::new();
        let Some(p) = t.peer(pid) else { return out };
        let mut at = t.peers[p.0 as usize].conns.head;
        while at != NIL {
            out.push(*t.conns[at as usize].payload.as_ref().unwrap());
            at = t.conns[at as usize].mine.next;
        }
        out
    }

    fn order(t: &PeerTable<u32>) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = t.silent.head;
        while at != NIL {
            out.push(*t.conns[at as usize].payload.as_ref().unwrap());
            at = t.conns[at as usize].all.next;
        }
        out
    }

    fn admission_order(t: &PeerTable<u32>) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = t.admitted.head;
        while at != NIL {
            out.push(*t.conns[at as usize].payload.as_ref().unwrap());
            at = t.conns[at as usize].born.next;
        }
        out
    }

    /// The per-connection bound `docs/ARCHITECTURE.md` states
    /// (*Unauthenticated clients*): one connection slot, at most one peer
    /// slot, one pid-map entry (8 bytes and a control byte at a load of
    /// 7/8) and one bucket, ≤ 104 bytes before the slabs' doubling.
    #[test]
    fn a_connection_costs_the_books_at_most_104_bytes() {
        let conn = std::mem::size_of::<Conn<std::sync::Arc<()>>>();
        let peer = std::mem::size_of::<Peer>();
        let map = (std::mem::size_of::<(i32, u32)>() + 1) * 8 / 7 + 1;
        let bucket = std::mem::size_of::<Ends>();
        assert!(conn + peer + map + bucket <= 104, "{conn} + {peer} + {map} + {bucket}");
    }

    #[test]
    fn the_heaviest_peer_follows_every_count() {
        let mut t = PeerTable::with_room_for(16);
        assert_eq!(t.heaviest(), None);
        let a: Vec<Handle> = (0..3).map(|i| t.insert(Some(10), i, i as u32)).collect();
        let b: Vec<Handle> = (0..2).map(|i| t.insert(Some(20), i, 10 + i as u32)).collect();
        let (p, n) = t.heaviest().unwrap();
        assert_eq!((t.pid(p), n), (Some(10), 3));
        t.remove(a[0]);
        t.remove(a[1]);
        let (p, n) = t.heaviest().unwrap();
        assert_eq!((t.pid(p), n), (Some(20), 2));
        assert_eq!(t.holds(t.peer(Some(10)).unwrap()), 1);
        t.remove(b[0]);
        t.remove(b[1]);
        let (p, n) = t.heaviest().unwrap();
        assert_eq!((t.pid(p), n), (Some(10), 1));
        t.remove(a[2]);
        assert_eq!(t.heaviest(), None);
        assert_eq!(t.peer(Some(10)), None, "a peer holding nothing leaves");
        assert!(order(&t).is_empty());
    }

    #[test]
    fn a_line_moves_a_connection_behind_the_silent_ones() {
        let mut t = PeerTable::with_room_for(16);
        let first = t.insert(Some(1), 0, 1);
        let _second = t.insert(Some(2), 1, 2);
        let _third = t.insert(Some(1), 2, 3);
        assert_eq!(order(&t), [1, 2, 3]);
        t.heard(first);
        assert_eq!(order(&t), [2, 3, 1]);
        assert_eq!(admission_order(&t), [1, 2, 3], "a line moves nothing here");
        assert_eq!(t.admitted_first().map(|(_, at)| at), Some(0));
        assert_eq!(order_of(&t, Some(1)), [3, 1]);
        let (h, admitted) = t.silent_longest_of(t.peer(Some(1)).unwrap()).unwrap();
        assert_eq!(admitted, 2);
        assert_eq!(t.remove(h), Some(3));
        assert_eq!(t.silent_longest().map(|(_, at)| at), Some(1));
    }

    #[test]
    fn a_handle_outlives_nothing() {
        let mut t = PeerTable::with_room_for(1);
        let gone = t.insert(None, 0, 1);
        assert_eq!(t.remove(gone), Some(1));
        // The slot is reused; the old handle names nothing in it.
        let next = t.insert(None, 1, 2);
        assert_eq!(t.remove(gone), None);
        t.heard(gone);
        assert_eq!(order(&t), [2]);
        assert_eq!(t.pid(t.peer(None).unwrap()), None, "unnamed peers are one peer");
        assert_eq!(t.remove(next), Some(2));
    }

    /// A model check: random inserts, lines and removals against plain
    /// vectors, with the slabs' reuse and the buckets' top exercised.
    #[test]
    fn the_books_agree_with_a_plain_model() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut t = PeerTable::with_room_for(4);
        // The model: (payload, pid, handle), silent longest first.
        let mut model: Vec<(u32, i32, Handle)> = Vec::new();
        for step in 0..20_000u32 {
            let roll = next() % 10;
            if roll < 4 || model.is_empty() {
                let pid = (next() % 6) as i32;
                let h = t.insert(Some(pid).filter(|p| *p != 0), u64::from(step), step);
                model.push((step, pid, h));
            } else if roll < 8 {
                let at = (next() % model.len() as u64) as usize;
                let gone = model.remove(at);
                assert_eq!(t.remove(gone.2), Some(gone.0));
            } else {
                let at = (next() % model.len() as u64) as usize;
                let spoke = model.remove(at);
                t.heard(spoke.2);
                model.push(spoke);
            }
            assert_eq!(order(&t), model.iter().map(|m| m.0).collect::<Vec<_>>());
            let mut born: Vec<u32> = model.iter().map(|m| m.0).collect();
            born.sort_unstable();
            assert_eq!(admission_order(&t), born);
            assert_eq!(
                t.admitted_first().map(|(_, at)| at),
                born.first().map(|&b| u64::from(b))
            );
            let most = (0..6)
                .map(|pid| model.iter().filter(|m| m.1 == pid).count())
                .max()
                .unwrap();
            assert_eq!(t.heaviest().map_or(0, |(_, n)| n), most);
            if let Some((p, n)) = t.heaviest() {
                let pid = t.pid(p).unwrap_or(0);
                assert_eq!(model.iter().filter(|m| m.1 == pid).count(), n);
                let theirs: Vec<u32> = model.iter().filter(|m| m.1 == pid).map(|m| m.0).collect();
                assert_eq!(order_of(&t, t.pid(p)), theirs);
            }
        }
    }
}

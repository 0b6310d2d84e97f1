//! Shrinking a differing case while it still differs (fresh daemons, so
//! the result reproduces under `harness diff`): delta debugging over
//! units, simplifying units, removing JSON members, then removing
//! characters inside string values and junk lines, within a run budget.

use super::Checker;
use crate::fuzzgen::{atoms, Case, Member, Req, Unit, Val};

struct Shrinker<'a, 'b> {
    ck: &'a Checker<'b>,
    budget: usize,
    used: usize,
}

impl Shrinker<'_, '_> {
    /// Whether `c` still differs (false once the budget is spent). A
    /// candidate that leaves a process un-awaited is refused unrun: it
    /// would race, and a race that happens to differ once is no shrink.
    fn test(&mut self, c: &Case) -> bool {
        if self.used >= self.budget || !c.awaits_every_process() {
            return false;
        }
        self.used += 1;
        self.ck.differs(c)
    }
}

pub(super) fn shrink(ck: &Checker, case: &Case) -> Case {
    let mut s = Shrinker {
        ck,
        budget: ck.o.shrink_budget,
        used: 0,
    };
    let mut cur = case.clone();
    for _round in 0..2 {
        let before = cur.clone();
        cur = ddmin_units(&mut s, cur);
        cur = simplify_units(&mut s, cur);
        cur = shrink_members(&mut s, cur);
        cur = shrink_chars(&mut s, cur);
        if cur == before || s.used >= s.budget {
            break;
        }
    }
    cur
}

/// Delta debugging over the case's units (at least one unit stays).
fn ddmin_units(s: &mut Shrinker, cur: Case) -> Case {
    let units = ddmin(s, cur.units.clone(), 1, |s, units| {
        let mut trial = cur.clone();
        trial.units = units.to_vec();
        s.test(&trial)
    });
    Case { units, ..cur }
}

/// Delta debugging (Zeller's ddmin): removes chunks of `items`, halving the
/// chunk size when nothing can go, while `differs` holds and the budget
/// lasts; never goes below `min_len` items.
fn ddmin<T: Clone>(
    s: &mut Shrinker,
    mut cur: Vec<T>,
    min_len: usize,
    mut differs: impl FnMut(&mut Shrinker, &[T]) -> bool,
) -> Vec<T> {
    let mut n = 2usize;
    while cur.len() > min_len && s.used < s.budget {
        let len = cur.len();
        let chunk = len.div_ceil(n);
        let mut reduced = false;
        let mut start = 0;
        while start < len {
            let end = (start + chunk).min(len);
            let mut trial = cur.clone();
            trial.drain(start..end);
            if trial.len() >= min_len && differs(s, &trial) {
                cur = trial;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
            start = end;
        }
        if !reduced {
            if n >= len {
                break;
            }
            n = (n * 2).min(len);
        }
    }
    cur
}

/// Smaller alternatives to one unit, most reduced first.
fn simplifications(u: &Unit) -> Vec<Vec<Unit>> {
    match u {
        Unit::Pair(a, b) => vec![
            vec![Unit::Req(a.clone())],
            vec![Unit::Req(b.clone())],
            vec![Unit::Req(a.clone()), Unit::Req(b.clone())],
        ],
        Unit::Proc { reqs, conn, proc_id } => {
            let mut v: Vec<Vec<Unit>> = reqs.iter().map(|r| vec![Unit::Req(r.clone())]).collect();
            // Drop one request after the first (the spawn stays first).
            for i in 1..reqs.len() {
                let mut rs = reqs.clone();
                rs.remove(i);
                v.push(vec![Unit::Proc {
                    reqs: rs,
                    conn: *conn,
                    proc_id: proc_id.clone(),
                }]);
            }
            v
        }
        Unit::Shutdown(_) | Unit::Fixture(_) | Unit::Req(_) | Unit::Close(_) => Vec::new(),
    }
}

fn simplify_units(s: &mut Shrinker, mut cur: Case) -> Case {
    let mut i = 0;
    while i < cur.units.len() && s.used < s.budget {
        let mut changed = false;
        for alt in simplifications(&cur.units[i]) {
            let mut trial = cur.clone();
            trial.units.splice(i..=i, alt);
            if s.test(&trial) {
                cur = trial;
                changed = true;
                break;
            }
        }
        if !changed {
            i += 1;
        }
    }
    cur
}

/// Mutable access to the `k`-th request of a case.
fn req_mut(c: &mut Case, mut k: usize) -> Option<&mut Req> {
    for u in &mut c.units {
        let rs: Vec<&mut Req> = match u {
            Unit::Req(r) => vec![r],
            Unit::Pair(a, b) => vec![a, b],
            Unit::Proc { reqs, .. } => reqs.iter_mut().collect(),
            _ => vec![],
        };
        let n = rs.len();
        if k < n {
            return rs.into_iter().nth(k);
        }
        k -= n;
    }
    None
}

fn nreqs(c: &Case) -> usize {
    let mut c = c.clone();
    (0..).take_while(|k| req_mut(&mut c, *k).is_some()).count()
}

/// Removes JSON members (envelope, then params) and line prefixes/suffixes.
fn shrink_members(s: &mut Shrinker, mut cur: Case) -> Case {
    for k in 0..nreqs(&cur) {
        // Prefix and suffix.
        for which in 0..2 {
            let mut trial = cur.clone();
            let r = req_mut(&mut trial, k).expect("exists");
            if !r.shrinkable || r.raw.is_some() {
                break;
            }
            let f = if which == 0 { &mut r.prefix } else { &mut r.suffix };
            if f.is_empty() {
                continue;
            }
            f.clear();
            if s.test(&trial) {
                cur = trial;
            }
        }
        // Envelope members, then the members of object values.
        let mut i = 0;
        loop {
            let r = req_mut(&mut cur, k).expect("exists");
            if !r.shrinkable || r.raw.is_some() || i >= r.members.len() || s.used >= s.budget {
                break;
            }
            let mut trial = cur.clone();
            req_mut(&mut trial, k).expect("exists").members.remove(i);
            if s.test(&trial) {
                cur = trial;
                continue;
            }
            let mut j = 0;
            while let Val::Obj(o) = &req_mut(&mut cur, k).expect("exists").members[i].val {
                if j >= o.len() || s.used >= s.budget {
                    break;
                }
                let mut trial = cur.clone();
                if let Val::Obj(o) = &mut req_mut(&mut trial, k).expect("exists").members[i].val {
                    o.remove(j);
                }
                if s.test(&trial) {
                    cur = trial;
                } else {
                    j += 1;
                }
            }
            i += 1;
        }
    }
    cur
}

/// ddmin over the atoms of a text, keeping what still differs.
fn ddmin_atoms(s: &mut Shrinker, atoms: Vec<String>, mut rebuild: impl FnMut(&str) -> Case) -> Vec<String> {
    ddmin(s, atoms, 0, |s, trial| s.test(&rebuild(&trial.concat())))
}

/// Removes characters inside string values (not destructive parameters)
/// and inside junk lines.
fn shrink_chars(s: &mut Shrinker, mut cur: Case) -> Case {
    for k in 0..nreqs(&cur) {
        let r = req_mut(&mut cur, k).expect("exists").clone();
        if !r.shrinkable {
            continue;
        }
        if let Some(raw) = &r.raw {
            let base = cur.clone();
            let kept = ddmin_atoms(s, atoms(raw), |t| {
                let mut c = base.clone();
                req_mut(&mut c, k).expect("exists").raw = Some(t.to_string());
                c
            });
            req_mut(&mut cur, k).expect("exists").raw = Some(kept.concat());
            continue;
        }
        // Paths to string values: (envelope index, Some(params index)).
        let mut spots = Vec::new();
        for (i, m) in r.members.iter().enumerate() {
            match &m.val {
                Val::Text(t) if !m.sensitive && is_string(t) => spots.push((i, None)),
                Val::Obj(o) => {
                    for (j, pm) in o.iter().enumerate() {
                        if let Val::Text(t) = &pm.val {
                            if !pm.sensitive && is_string(t) {
                                spots.push((i, Some(j)));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        for (i, j) in spots {
            let text = match text_at(&r.members, i, j) {
                Some(t) => t,
                None => continue,
            };
            let inner = text[1..text.len() - 1].to_string();
            if inner.is_empty() {
                continue;
            }
            let base = cur.clone();
            let kept = ddmin_atoms(s, atoms(&inner), |t| {
                let mut c = base.clone();
                set_text(
                    &mut req_mut(&mut c, k).expect("exists").members,
                    i,
                    j,
                    format!("\"{t}\""),
                );
                c
            });
            set_text(
                &mut req_mut(&mut cur, k).expect("exists").members,
                i,
                j,
                format!("\"{}\"", kept.concat()),
            );
        }
    }
    cur
}

fn is_string(t: &str) -> bool {
    t.len() >= 2 && t.starts_with('"') && t.ends_with('"')
}

fn text_at(ms: &[Member], i: usize, j: Option<usize>) -> Option<String> {
    let v = match j {
        None => &ms.get(i)?.val,
        Some(j) => match &ms.get(i)?.val {
            Val::Obj(o) => &o.get(j)?.val,
            Val::Text(_) => return None,
        },
    };
    match v {
        Val::Text(t) => Some(t.clone()),
        Val::Obj(_) => None,
    }
}

fn set_text(ms: &mut [Member], i: usize, j: Option<usize>, t: String) {
    let v = match j {
        None => &mut ms[i].val,
        Some(j) => match &mut ms[i].val {
            Val::Obj(o) => &mut o[j].val,
            Val::Text(_) => return,
        },
    };
    *v = Val::Text(t);
}

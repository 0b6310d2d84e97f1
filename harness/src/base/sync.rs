//! Locks that survive a panicked holder. A harness thread that panics is
//! reported where it is joined; the data it leaves behind (replies read,
//! events logged, counts) is still what the other threads report, so a
//! poisoned lock hands it over instead of panicking in turn.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn into_inner<T>(m: Mutex<T>) -> T {
    m.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `cv` for at most `d`; the guard back either way.
pub(crate) fn wait_timeout<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>, d: Duration) -> MutexGuard<'a, T> {
    match cv.wait_timeout(guard, d) {
        Ok((g, _)) => g,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_hands_over_its_data() {
        let m = std::sync::Arc::new(Mutex::new(vec![1]));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let mut g = m2.lock().unwrap();
            g.push(2);
            panic!("holder dies");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*lock(&m), [1, 2]);
        let cv = Condvar::new();
        let g = wait_timeout(&cv, lock(&m), Duration::from_millis(1));
        assert_eq!(g.len(), 2);
        drop(g);
        let m = std::sync::Arc::try_unwrap(m).unwrap();
        assert_eq!(into_inner(m), [1, 2]);
    }
}

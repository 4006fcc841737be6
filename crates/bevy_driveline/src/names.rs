//! Part and flange names stored once per process.
//!
//! Every vehicle spawned from one file has parts of the same names (`"engine"`, `"clutch"`,
//! ...) joined at flanges of the same names (`"flange_a"`, `"support"`, ...). A thousand cars
//! would hold a thousand copies of each, some two hundred small heap blocks a car. Instead the
//! spawn asks [`interned`] for each name: the first time a text is asked for it is copied once
//! into memory that lives as long as the process, and every later [`Name`](bevy_ecs::name::Name)
//! and [`crate::Connection`] of that text borrows it.
//!
//! The copies are never freed, so their total is bounded: once [`BUDGET`] bytes of distinct text
//! are held, a new text is returned as an owned string (a program that names every part
//! differently, say with a serial number, then pays for its names as it did before).

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Mutex;

/// Bytes of distinct names held for the life of the process, at most: 64 KiB (some 4,000 names
/// of 16 characters; the shipped vehicles have about 100 distinct names and flanges).
pub(crate) const BUDGET: usize = 64 * 1024;

/// The names held, and their total length in bytes.
static HELD: Mutex<(Option<HashSet<&'static str>>, usize)> = Mutex::new((None, 0));

/// `text` as a name that lives as long as the process when it is held (or can still be held
/// within [`BUDGET`]), else as an owned copy. Spawning only: it takes a lock.
pub(crate) fn interned(text: &str) -> Cow<'static, str> {
    let Ok(mut held) = HELD.lock() else { return Cow::Owned(text.to_owned()) };
    let (set, bytes) = &mut *held;
    let set = set.get_or_insert_with(HashSet::new);
    if let Some(&s) = set.get(text) {
        return Cow::Borrowed(s);
    }
    if *bytes + text.len() > BUDGET {
        return Cow::Owned(text.to_owned());
    }
    let s: &'static str = Box::leak(text.to_owned().into_boxed_str());
    set.insert(s);
    *bytes += s.len();
    Cow::Borrowed(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_asked_twice_is_one_copy() {
        let (a, b) = (interned("names_test_flange"), interned(&String::from("names_test_flange")));
        assert!(matches!((&a, &b), (Cow::Borrowed(_), Cow::Borrowed(_))));
        assert_eq!(a.as_ptr(), b.as_ptr(), "the second asks gets the first copy");
    }

    #[test]
    fn past_the_budget_names_are_owned() {
        // (Fills the budget: the other test of this module asks for its name first or finds it.)
        let _ = interned("names_test_flange");
        let big = "x".repeat(BUDGET);
        assert!(matches!(interned(&big), Cow::Owned(ref s) if *s == big));
        assert!(matches!(interned("names_test_flange"), Cow::Borrowed(_)), "held names stay held");
    }
}

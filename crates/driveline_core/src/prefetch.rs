//! Cache hints: bring a value's memory toward the processor before it is read.
//!
//! A fleet steps its vehicles one after another, and a vehicle's state has left the caches by
//! the time its turn comes back. Hinting the next vehicle's state while this one steps lets the
//! memory system fetch it in parallel with the work, instead of one miss at a time when the step
//! reaches each line. A hint changes no result: it reads nothing into the program, and the
//! processor may ignore it.

#![allow(unsafe_code)]

/// Bytes in a cache line (x86-64 and the common AArch64 cores).
const LINE: usize = 64;

/// Hints every cache line of `value`'s inline bytes (not what it points to).
#[inline]
pub fn value<T: ?Sized>(value: &T) {
    lines(value as *const T as *const u8, std::mem::size_of_val(value));
}

/// Hints every cache line of a slice's elements.
#[inline]
pub fn slice<T>(s: &[T]) {
    lines(s.as_ptr() as *const u8, std::mem::size_of_val(s));
}

/// Hints the lines of `len` bytes from `start`.
#[inline]
fn lines(start: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    let first = start as usize & !(LINE - 1);
    let end = start as usize + len;
    let mut at = first;
    while at < end {
        hint(at);
        at += LINE;
    }
}

/// Hints the cache line that holds `address` (an address only: nothing is read or written
/// there, and any value is allowed).
#[inline(always)]
pub fn hint(address: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and writes nothing; any address is allowed (SSE is part
    // of the x86-64 baseline). The address is only an integer here, never dereferenced.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T1>(address as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

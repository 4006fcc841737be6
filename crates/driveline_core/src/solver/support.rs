//! Small helpers: a vector whose capacity survives cloning, element bit masks, finiteness tests.

use super::*;

/// A vector with a reserved capacity that survives cloning, so that a cloned simulation (a
/// snapshot) steps without allocating and records events exactly like the original.
#[derive(Debug)]
pub(super) struct CapVec<T> {
    pub(super) v: Vec<T>,
    pub(super) cap: usize,
}

impl<T> CapVec<T> {
    pub(super) fn new(cap: usize) -> Self {
        Self { v: Vec::with_capacity(cap), cap }
    }
    /// True while a push stays within the reserved capacity.
    pub(super) fn has_room(&self) -> bool {
        self.v.len() < self.cap
    }
}

impl<T: Clone> Clone for CapVec<T> {
    fn clone(&self) -> Self {
        let mut v = Vec::with_capacity(self.cap);
        v.extend_from_slice(&self.v);
        Self { v, cap: self.cap }
    }
}

impl<T> std::ops::Deref for CapVec<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.v
    }
}

impl<T> std::ops::DerefMut for CapVec<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.v
    }
}

/// A slip at or below this is zero (to rounding) among node speeds of scale `w_max` (the
/// largest of them and 1 rad/s, [`speed_scale`]): 1e-12 of it.
pub(super) fn zero_slip_tolerance(w_max: f64) -> f64 {
    1e-12 * w_max
}

/// The largest of 1 and the speeds `|w|` (the scale of [`zero_slip_tolerance`]).
pub(super) fn speed_scale(w: &[f64]) -> f64 {
    // (A compare and select, not `f64::max`: the same result here, a NaN speed included,
    // which neither lets through, without `max`'s NaN branches.)
    w.iter().fold(1.0f64, |s, v| if v.abs() > s { v.abs() } else { s })
}

/// True when no value of `x` is infinite or NaN, without branches: `v * 0` is a signed zero
/// for a finite `v` and NaN (an exponent of all ones) otherwise, and the bits are or-ed.
pub(super) fn all_finite(x: &[f64]) -> bool {
    const EXP: u64 = 0x7ff0_0000_0000_0000;
    x.iter().fold(0, |acc, v| acc | (v * 0.0).to_bits()) & EXP != EXP
}

/// Bit `i` set for each sliding (Forward or Backward) element `i` of `modes`.
pub(super) fn sliding_mask(modes: &[FrictionMode]) -> u64 {
    mask_where(modes, |m| matches!(m, FrictionMode::Forward | FrictionMode::Backward))
}

/// Bit `i` set for each item `i` of `items` (at most 64) that satisfies `pred`.
pub(super) fn mask_where<T>(items: &[T], pred: impl Fn(&T) -> bool) -> u64 {
    items.iter().enumerate().fold(0, |m, (i, x)| if pred(x) { m | 1 << i } else { m })
}

/// The mask of the first `n` (at most 64) elements.
pub(super) fn low_bits(n: usize) -> u64 {
    if n == 0 { 0 } else { u64::MAX >> (64 - n) }
}

/// The indices of the set bits of `mask`, ascending.
#[inline]
pub(super) fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let i = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        Some(i)
    })
}

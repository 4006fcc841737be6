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

/// The stages of a staged hint ([`crate::Vehicle::prefetch_stage`]): stage 0 hints a value's
/// own bytes, stage 1 the buffers their pointers name, stage 2 the buffers named from those.
/// Hinting a buffer reads its pointer, and a pointer out of the cache is a miss the hint waits
/// on; a fleet that runs stage `STAGES - j` on the vehicle `j` places ahead of the one it
/// steps reads, at each stage, only pointers the stage before brought in.
pub const STAGES: usize = 3;

/// Runs `step` on each of `items` in order; before each step, `ahead(item, stage)` on each of
/// the next [`STAGES`] items, the item `j` places ahead with stage `STAGES - j`, so that every
/// item but the first sees stages 0, 1, ... in order before its own step (the first items
/// ahead get the stages they would have had further back). A fleet's pass hints the vehicles
/// ahead there, a stage at a time.
pub fn for_each_ahead<I: Iterator>(mut items: I, ahead: impl Fn(&I::Item, usize), mut step: impl FnMut(I::Item)) {
    // At first `window[j]` is the item `j` places ahead of the current one (`window[0]`).
    let mut window: [Option<I::Item>; STAGES + 1] = std::array::from_fn(|_| items.next());
    for (j, item) in window.iter().enumerate().skip(1) {
        if let Some(item) = item {
            (0..STAGES - j).for_each(|stage| ahead(item, stage));
        }
    }
    // A ring: `window[(head + j) % (STAGES + 1)]` is the item `j` places ahead (the items stay
    // where they are: rotating the array moved every item of a fleet's window, a few hundred
    // bytes each, at every step).
    let mut head = 0;
    while let Some(current) = window[head].take() {
        for j in 1..=STAGES {
            if let Some(item) = &window[(head + j) % (STAGES + 1)] {
                ahead(item, STAGES - j);
            }
        }
        step(current);
        // (The slot just emptied is the farthest ahead of the next item.)
        window[head] = items.next();
        head = (head + 1) % (STAGES + 1);
    }
}

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

/// Whether a pass over many vehicles hints the next one's state toward the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HintPolicy {
    /// Measure both and keep the faster ([`HintTuner`]): the default.
    #[default]
    Auto,
    /// Always hint.
    Always,
    /// Never hint.
    Never,
}

/// Passes of a trial: blocks of four, hints on, off, off, on (so that a cost drifting steadily
/// through the trial weighs on both settings alike).
const TRIAL: usize = 32;
/// Passes before the first trial: a fleet's first passes build its vehicles and compile their
/// first modes, and their costs fall steeply from pass to pass.
const WARMUP: u32 = 64;
/// Passes between the end of one trial and the start of the next.
const PERIOD: u32 = 4096;

/// Whether pass `p` of a trial hints, and its place among the costs of its setting.
fn trial_pass(p: usize) -> (bool, usize) {
    let on = matches!(p % 4, 0 | 3);
    (on, (p / 4) * 2 + usize::from(p % 4 >= 2))
}

/// Chooses, by measuring, whether a fleet's pass over its vehicles hints the next one
/// ([`crate::Vehicle::prefetch`]).
///
/// Whether the hints pay depends on the machine: where a fleet's state does not fit the
/// last-level cache they take the waiting out of its misses (a third of a thousand sedans'
/// step time on a 2-core AMD EPYC with 32 MiB of L3); where it fits, the processor's own
/// prefetchers bring most of it in time and the hints' instructions and loads cost more than
/// they save (about a tenth on a 2-core Intel Xeon with 480 MiB of L3; docs/performance.md).
/// With [`HintPolicy::Auto`] the tuner hints through a warm-up of 64 passes (the vehicles'
/// builds, the first modes compiled), then runs a trial of 32 passes in blocks of four, hints
/// on, off, off, on (a steady drift of the cost through the trial weighs on both settings
/// alike), keeps the setting whose median cost per vehicle is lower, and tries again every
/// 4,096 passes (a workload changes: cars that launch or shift, a fleet that grows). A trial's
/// passes at the slower setting cost a few per mille of the passes. A hint changes no result,
/// so the choice changes only the speed.
///
/// Use: before a pass, [`HintTuner::hints`] says whether to hint; after it,
/// [`HintTuner::record`] takes what it cost per vehicle.
#[derive(Clone, Debug)]
pub struct HintTuner {
    policy: HintPolicy,
    chosen: bool,
    until_trial: u32,
    /// The trial's pass so far (`TRIAL`: none running).
    pass: usize,
    /// The trial's costs, hints on (`[0]`) and off (`[1]`).
    costs: [[f64; TRIAL / 2]; 2],
}

impl Default for HintTuner {
    fn default() -> Self {
        Self::new(HintPolicy::Auto)
    }
}

impl HintTuner {
    /// A tuner with `policy`; with [`HintPolicy::Auto`] its first trial follows a warm-up.
    pub fn new(policy: HintPolicy) -> Self {
        let mut t = Self { policy, chosen: true, until_trial: 0, pass: TRIAL, costs: [[0.0; TRIAL / 2]; 2] };
        t.apply(policy);
        if policy == HintPolicy::Auto {
            (t.pass, t.until_trial) = (TRIAL, WARMUP);
        }
        t
    }

    /// The policy in force.
    pub fn policy(&self) -> HintPolicy {
        self.policy
    }

    /// Sets the policy. Setting the one in force changes nothing; switching to
    /// [`HintPolicy::Auto`] starts a trial at the next pass.
    pub fn set_policy(&mut self, policy: HintPolicy) {
        if policy != self.policy {
            self.apply(policy);
        }
    }

    fn apply(&mut self, policy: HintPolicy) {
        self.policy = policy;
        match policy {
            HintPolicy::Auto => {
                self.pass = 0;
                self.until_trial = PERIOD;
            }
            HintPolicy::Always => (self.chosen, self.pass) = (true, TRIAL),
            HintPolicy::Never => (self.chosen, self.pass) = (false, TRIAL),
        }
    }

    /// Whether the next pass hints.
    pub fn hints(&self) -> bool {
        if self.pass < TRIAL { trial_pass(self.pass).0 } else { self.chosen }
    }

    /// Whether a trial is running (its passes alternate).
    pub fn in_trial(&self) -> bool {
        self.pass < TRIAL
    }

    /// What the setting is outside trials: the last trial's choice, or the policy's.
    pub fn chosen(&self) -> bool {
        self.chosen
    }

    /// Takes a pass's cost, in seconds per vehicle, after a pass run as [`HintTuner::hints`]
    /// said. A cost that is not finite and positive is not counted.
    pub fn record(&mut self, seconds_per_vehicle: f64) {
        if self.policy != HintPolicy::Auto {
            return;
        }
        if self.pass == TRIAL {
            self.until_trial = self.until_trial.saturating_sub(1);
            if self.until_trial == 0 {
                self.pass = 0;
            }
            return;
        }
        if !(seconds_per_vehicle.is_finite() && seconds_per_vehicle > 0.0) {
            return;
        }
        let (on, k) = trial_pass(self.pass);
        self.costs[usize::from(!on)][k] = seconds_per_vehicle;
        self.pass += 1;
        if self.pass == TRIAL {
            // The medians, each the mean of its two middle costs: with the passes' order a
            // steady drift moves both alike.
            let [on, off] = self.costs.map(|mut c| {
                c.sort_by(f64::total_cmp);
                0.5 * (c[c.len() / 2 - 1] + c[c.len() / 2])
            });
            self.chosen = on < off;
            self.until_trial = PERIOD;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `passes` passes of the tuner, each costing `on` or `off` seconds per vehicle.
    fn run(t: &mut HintTuner, passes: usize, on: f64, off: f64) -> Vec<bool> {
        (0..passes)
            .map(|_| {
                let h = t.hints();
                t.record(if h { on } else { off });
                h
            })
            .collect()
    }

    #[test]
    fn auto_keeps_the_faster_setting_and_tries_again_later() {
        let mut t = HintTuner::default();
        // Hints through the warm-up, then a trial in blocks of on, off, off, on.
        assert!(run(&mut t, WARMUP as usize, 2e-6, 1e-6).iter().all(|&h| h));
        assert!(t.in_trial());
        let trial = run(&mut t, TRIAL, 2e-6, 1e-6);
        assert_eq!(trial, (0..TRIAL).map(|k| k % 4 == 0 || k % 4 == 3).collect::<Vec<_>>());
        assert!(!t.in_trial() && !t.chosen(), "hints cost more here: off");
        assert!(run(&mut t, PERIOD as usize - 1, 2e-6, 1e-6).iter().all(|&h| !h));
        // The next trial sees the hints pay now.
        assert!(run(&mut t, 1, 1e-6, 2e-6) == [false] && t.in_trial());
        run(&mut t, TRIAL, 1e-6, 2e-6);
        assert!(!t.in_trial() && t.chosen());
    }

    #[test]
    fn a_trial_takes_the_median_so_one_slow_pass_does_not_decide() {
        let mut t = HintTuner::default();
        run(&mut t, WARMUP as usize, 1e-6, 1e-6);
        for k in 0..TRIAL {
            let h = t.hints();
            // Hints 10 % faster, but the first hinted pass (a vehicle's build, say) 100 times slower.
            t.record(match (h, k) {
                (true, 0) => 1e-4,
                (true, _) => 0.9e-6,
                (false, _) => 1e-6,
            });
        }
        assert!(t.chosen());
    }

    /// A fleet's costs falling steeply through a trial (its cars leaving a launch, say) do not
    /// decide it: hints 1 % dearer lose and 1 % cheaper win, though the cost falls 3 % a pass (in
    /// plain alternation, the hints always first, the falling cost would favour the hints).
    #[test]
    fn a_steady_drift_through_the_trial_weighs_on_both_settings_alike() {
        for (factor, chosen) in [(1.01, false), (0.99, true)] {
            let mut t = HintTuner::default();
            run(&mut t, WARMUP as usize, 1e-6, 1e-6);
            for k in 0..TRIAL {
                let h = t.hints();
                // 3 % a pass less: a sixteenth of the trial's first cost by its end.
                let drift = 1e-6 * (1.0 - 0.03 * k as f64);
                t.record(if h { drift * factor } else { drift });
            }
            assert_eq!(t.chosen(), chosen, "factor {factor}");
        }
    }

    #[test]
    fn bad_costs_are_not_counted_and_fixed_policies_do_not_measure() {
        let mut t = HintTuner::default();
        run(&mut t, WARMUP as usize, 1e-6, 1e-6);
        for bad in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
            t.record(bad);
        }
        assert!(t.in_trial() && t.hints(), "still at the trial's first pass");
        let mut t = HintTuner::new(HintPolicy::Never);
        assert!(run(&mut t, 3 * TRIAL, 1e-6, 2e-6).iter().all(|&h| !h));
        t.set_policy(HintPolicy::Always);
        assert!(run(&mut t, 3 * TRIAL, 2e-6, 1e-6).iter().all(|&h| h));
        t.set_policy(HintPolicy::Auto);
        assert!(t.in_trial());
    }

    /// Each item is stepped once, in order, and before its step it saw every stage in order
    /// (all but the first, which has no item before it).
    #[test]
    fn for_each_ahead_gives_every_item_every_stage_before_its_step() {
        for n in [0usize, 1, 2, 3, 4, 5, 17] {
            let log: Vec<std::cell::RefCell<Vec<usize>>> = (0..n).map(|_| Default::default()).collect();
            let mut order = Vec::new();
            for_each_ahead(
                0..n,
                |&k, stage| log[k].borrow_mut().push(stage),
                |k| {
                    log[k].borrow_mut().push(usize::MAX);
                    order.push(k);
                },
            );
            assert_eq!(order, (0..n).collect::<Vec<_>>());
            let all: Vec<usize> = (0..STAGES).chain([usize::MAX]).collect();
            for (k, seen) in log.iter().enumerate() {
                let want = if k == 0 { &all[STAGES..] } else { &all[..] };
                assert_eq!(seen.borrow()[..], *want, "{n} items, item {k}");
            }
        }
    }
}

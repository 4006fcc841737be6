//! [`CacheHints`]: whether a fleet's step hints the next vehicle toward the cache.

use bevy_ecs::prelude::*;
use bevy_reflect::prelude::*;
use driveline_core::prefetch::{HintPolicy, HintTuner};

/// What a fleet's step does about cache hints (see [`CacheHints`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Reflect)]
pub enum CacheHintPolicy {
    /// Measure the step with and without the hints now and then, keep the faster (default).
    #[default]
    Auto,
    /// Always hint the next vehicle.
    Always,
    /// Never hint.
    Never,
}

impl From<CacheHintPolicy> for HintPolicy {
    fn from(p: CacheHintPolicy) -> Self {
        match p {
            CacheHintPolicy::Auto => HintPolicy::Auto,
            CacheHintPolicy::Always => HintPolicy::Always,
            CacheHintPolicy::Never => HintPolicy::Never,
        }
    }
}

/// Whether the vehicles' step in a fleet (from two vehicles on, where it goes through them in
/// one run per compute thread) hints each next vehicle's controllers, simulation, part rows
/// and telemetry toward the cache while it steps the current one
/// ([`driveline_core::Vehicle::prefetch`]).
///
/// The hints pay where a fleet's state does not fit the last-level cache and cost where it
/// does (the processor's own prefetchers then bring most of it in time): on a 2-core AMD EPYC
/// (32 MiB of L3) a thousand 8HP sedans stepped about a third faster with them, on a 2-core
/// Intel Xeon (480 MiB of L3) about a tenth slower (docs/performance.md). With
/// [`CacheHintPolicy::Auto`] the step times itself: after a warm-up of 64 ticks (the builds,
/// the first modes compiled), a trial of 32 ticks in blocks of hints on, off, off, on keeps the
/// setting whose median time per vehicle is lower, and a new trial follows every 4,096 ticks
/// ([`driveline_core::prefetch::HintTuner`]). A hint changes no result: the
/// setting changes the speed, never a bit of the motion.
///
/// Set [`CacheHints::policy`] to fix it; [`CacheHints::hinting`] says what the step does.
#[derive(Resource, Debug, Clone, Default, Reflect)]
#[reflect(Resource, Default)]
pub struct CacheHints {
    /// Measure (default), always hint or never hint.
    pub policy: CacheHintPolicy,
    #[reflect(ignore)]
    tuner: HintTuner,
}

impl CacheHints {
    /// A resource with `policy`.
    pub fn new(policy: CacheHintPolicy) -> Self {
        Self { policy, tuner: HintTuner::new(policy.into()) }
    }

    /// Whether the fleet's step hints outside its trials: the last trial's choice under
    /// [`CacheHintPolicy::Auto`] (hinting until the first trial ends), else the policy's.
    pub fn hinting(&self) -> bool {
        self.tuner.chosen()
    }

    /// Whether a trial is running (its ticks alternate).
    pub fn in_trial(&self) -> bool {
        self.tuner.in_trial()
    }

    /// Whether this tick's fleet step hints (the policy taken over first).
    pub(crate) fn this_tick(&mut self) -> bool {
        self.tuner.set_policy(self.policy.into());
        self.tuner.hints()
    }

    /// This tick's fleet step cost `seconds` for `vehicles`.
    pub(crate) fn record(&mut self, seconds: f64, vehicles: usize) {
        self.tuner.record(seconds / vehicles.max(1) as f64);
    }
}

//! What a step reports: friction modes, mode-change events, counters, the energy ledger, errors.

/// Friction element mode, with the MSL integer codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum FrictionMode {
    /// Sliding with negative relative speed (code -1).
    Backward,
    /// Stuck: relative speed zero, torque whatever keeps it so (code 0).
    Stuck,
    /// Sliding with positive relative speed (code 1).
    Forward,
    /// No normal force, no torque (code 2).
    Free,
}

impl FrictionMode {
    /// MSL integer code: -1, 0, 1, 2.
    pub fn code(self) -> i32 {
        match self {
            FrictionMode::Backward => -1,
            FrictionMode::Stuck => 0,
            FrictionMode::Forward => 1,
            FrictionMode::Free => 2,
        }
    }
    pub(super) fn dir(self) -> f64 {
        match self {
            FrictionMode::Backward => -1.0,
            FrictionMode::Forward => 1.0,
            _ => 0.0,
        }
    }
}

/// A friction element changed mode at `time` (located inside the step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeEvent {
    /// Event time, s.
    pub time: f64,
    /// Index of the element in the network's element list.
    pub element: usize,
    /// Mode before.
    pub from: FrictionMode,
    /// Mode after.
    pub to: FrictionMode,
}

/// A run-time input value the input policy did not take as given ([`Simulation::set_input`]):
/// raised once per episode (the first bad value of an input after a good one), readable after
/// the next step from [`Simulation::input_rejections`].
///
/// [`Simulation::set_input`]: crate::Simulation::set_input
/// [`Simulation::input_rejections`]: crate::Simulation::input_rejections
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputRejected {
    /// The input, as its index in [`Simulation::input_names`](crate::Simulation::input_names).
    pub input: usize,
    /// The value given (NaN, an infinity, or past +-[`limits::SIGNAL`](crate::limits::SIGNAL)).
    pub value: f64,
    /// The value used instead: the clamped value, or for NaN the last valid one.
    pub used: f64,
}

/// Counters of what the solver did, for diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepStats {
    /// Steps taken.
    pub steps: u64,
    /// Sub-steps (step pieces between events).
    pub substeps: u64,
    /// State events located.
    pub state_events: u64,
    /// Mode compilations (cache misses).
    pub mode_compiles: u64,
    /// Sub-steps whose Newton iteration hit the cap.
    pub newton_failures: u64,
    /// Newton iterations over all integrated sub-steps (one per linear solve; a linear mode
    /// takes one).
    pub newton_iterations: u64,
    /// Jacobian evaluations (and refactorisations) of nonlinear modes.
    pub jacobian_updates: u64,
    /// Steps that hit `max_substeps`.
    pub zeno_guards: u64,
    /// Sub-steps taken by the time-only kernel (modes whose forces depend on time alone; they
    /// count one Newton iteration each, the linear solve they stand for).
    pub time_only_substeps: u64,
}

/// Energy bookkeeping since the start, J.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EnergyLedger {
    /// Work done by sources and loads (torque sources, quadratic loads).
    pub input: f64,
    /// Energy dissipated by dampers, sliding friction, backlash damping and lock impacts.
    pub dissipated: f64,
    /// Kinetic energy now.
    pub kinetic: f64,
    /// Potential energy of springs now.
    pub potential: f64,
    /// Kinetic + potential energy at the start.
    pub initial: f64,
}

impl EnergyLedger {
    /// `input - (kinetic + potential - initial) - dissipated`: zero up to rounding.
    pub fn residual(&self) -> f64 {
        self.input - (self.kinetic + self.potential - self.initial) - self.dissipated
    }
    /// The largest of the ledger's magnitudes, to make the residual relative.
    pub fn scale(&self) -> f64 {
        self.input.abs().max(self.dissipated.abs()).max(self.kinetic + self.potential).max(self.initial).max(1e-300)
    }
}

/// Why a run-time input was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    /// No input of that name.
    #[error("no input named '{0}' in this network")]
    Unknown(String),
    /// NaN (a value) or a non-finite ramp rate: refused, the input keeps its last valid value.
    #[error("input '{name}' = {value} refused: inputs must be finite")]
    NotFinite {
        /// Input name.
        name: String,
        /// The refused value.
        value: f64,
    },
}

/// Why a step was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepError {
    /// The step size is not a positive finite number.
    #[error("step size {0} s is not a positive finite number")]
    BadStep(f64),
    /// The step is too short to advance the clock from time `t`, s (`t + dt == t`).
    #[error("step size {dt} s is too short to advance the time from t = {t} s")]
    TooShort {
        /// The step, s.
        dt: f64,
        /// The time, s.
        t: f64,
    },
    /// The step is more than a million times the longest piece
    /// ([`Simulation::max_step`](crate::Simulation::max_step)): refused rather than split.
    #[error("step size {dt} s is longer than a million times the longest piece ({max_step} s)")]
    TooLong {
        /// The step, s.
        dt: f64,
        /// The longest piece, s.
        max_step: f64,
    },
    /// The step met a singular system (a mode whose iteration matrix or reduced inertia does
    /// not determine the motion: for example a speed-dependent torque whose slope cancels an
    /// inertia at this step size) and could not go on (a non-finite state, or a Newton
    /// iteration that converged on no cut); the state was restored to the step start.
    #[error("the step from t = {t} s met a singular system in {elements}; the state was restored to that time")]
    Singular {
        /// The step's start time, s.
        t: f64,
        /// The bodies (inertias, masses) along the undetermined coordinate, comma separated
        /// (the first four).
        elements: String,
    },
    /// A sub-step's Newton iteration did not converge, not even cut 24 times to a quarter
    /// (to 3.6e-15 of its length): a motion that runs away within the step, or a law that
    /// jumps with the iterate and keeps the iteration cycling. The state was restored to the
    /// step start rather than continue from an unconverged iterate.
    #[error(
        "the step from t = {t} s did not converge in {elements}, not even in sub-steps of {h:e} s; the state was restored to that time"
    )]
    NotConverged {
        /// The step's start time, s.
        t: f64,
        /// The shortest sub-step tried, s.
        h: f64,
        /// The bodies (inertias, masses) along the coordinate whose residual was largest,
        /// comma separated (the first four).
        elements: String,
    },
    /// The step produced a non-finite state (for example from a NaN signal value, or a motion
    /// that runs away); the state was restored to the step start.
    #[error("the step from t = {t} s produced a non-finite state in {elements}; the state was restored to that time")]
    NonFinite {
        /// The step's start time, s.
        t: f64,
        /// The bodies (inertias, masses) whose angle or speed went non-finite, comma separated
        /// (the first four).
        elements: String,
    },
}

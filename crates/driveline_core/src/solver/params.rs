//! Integration parameters: the solver's tolerances, its mode cache and how Newton starts.

/// Every tunable of the solver, with its default, unit and trade-off.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IntegrationParameters {
    /// Newton tolerance on the stage velocities, relative to `1 + max |q|` (default 1e-10: at
    /// 600 rad/s a correction below 6e-8 rad/s ends the iteration). Only nonlinear laws
    /// (backlash, quadratic loads, speed-dependent friction, engine and converter maps) iterate;
    /// linear modes solve once. The stage forces are those of the last iterate, so the energy
    /// ledger closes to about this tolerance times the power flow (1e-11 relative over the
    /// shipped vehicle's scripted drive; 1e-14 with 1e-13, at about 15 % more work in traffic,
    /// where every third step otherwise needs a fresh Jacobian).
    pub newton_tolerance: f64,
    /// Newton iteration cap per sub-step (default 20). Reaching it is reported in
    /// [`StepStats::newton_failures`](super::StepStats::newton_failures), never a panic.
    pub max_newton_iterations: usize,
    /// Event-time resolution, s (default 1e-13). Root finding stops when the bracket is smaller.
    pub event_time_tolerance: f64,
    /// Sub-steps (events) allowed in one step before the rest of the step is taken without
    /// event location (default 256). Guards against Zeno behaviour; counted in the stats.
    pub max_substeps: usize,
    /// Number of compiled modes (lock patterns) a simulation keeps at hand (default 32, 12 for
    /// a vehicle; at least 3). The compiled modes live in a library that simulations of an equal network
    /// share (a slot is a handle and this simulation's limits: under 0.5 KB); the library
    /// holds room for this many modes of up to four such simulations, about 18 KB each for
    /// the 8HP sedan (17 coordinates, 27 rows). Fewer slots save the library's memory at the
    /// price of finding modes again that a drive cycle revisits.
    pub mode_cache_slots: usize,
    /// Sets of Jacobians and Newton factors the mode slots borrow (default 2, 1 for a vehicle;
    /// at least 1, at most one per slot), least recently used lent again first. A set holds a
    /// mode's reduced Jacobians and the inverse of its Newton matrix (4 KB for the 8HP sedan). A
    /// mode that finds its set lent away forms them again: a linear mode to the same bits, a
    /// nonlinear mode from a fresh Jacobian, which can move its Newton iterates within the
    /// tolerance. With one set, MSL `Friction` at 1/60 s ends differently in the last bits;
    /// every shipped vehicle over UDDS and US06, at 1 ms and at 1/60 s, is the same to the bit
    /// (measured 2026-11-29), so a vehicle keeps one.
    #[serde(default = "two_sets")]
    pub newton_sets: usize,
    /// Integrate the energy ledger (default true; a [`crate::Vehicle`] steps without it unless
    /// asked, [`crate::Vehicle::set_track_energy`]).
    ///
    /// The ledger books every element's power at the converged stages, so Newton iterates
    /// until a correction is itself within `newton_tolerance` (its forces are then those of
    /// the accepted stages to the tolerance). Without the ledger an iteration may also end on
    /// its contraction estimate, which saves the confirming iteration on most steps of a
    /// shift (1.85 -> 1.08 iterations a step through the 8HP sedan's 1-2 upshift, a sixth of
    /// the step) and gives the same motion to the tolerance: see the solver module's "When
    /// Newton stops". Time-only and linear modes solve once either way; the ledger costs
    /// their two force evaluations per sub-step.
    pub track_energy: bool,
    /// Where Newton starts the stages of a sub-step that continues the last one in the same
    /// mode (default [`NewtonStart::Forces`]). Only where Newton starts changes, not what it
    /// converges to: every choice gives the same motion to the Newton tolerance, at different
    /// iteration counts (see [`NewtonStart`]).
    pub newton_start: NewtonStart,
    /// The longest step taken in one piece, s (default 0.05): a longer step is split into equal
    /// sub-steps of at most this length (a step more than a million times longer is refused,
    /// [`StepError::TooLong`](super::StepError::TooLong)). The Gauss step is A-stable at any
    /// length; the bound keeps event location and the Newton start within the motion's time
    /// scales, as a game's hitch of a whole second would not. A network whose springs and
    /// dampers are faster has a shorter bound of its own
    /// ([`Simulation::max_step`](super::Simulation::max_step)): the shorter one holds. Not a
    /// positive number (NaN included): only the network's own bound.
    pub max_step: f64,
}

/// The first guess of the stage velocities of a nonlinear mode's sub-step that continues the
/// last one in the same mode ([`IntegrationParameters::newton_start`]). Each choice builds on
/// the one before; the iteration counts are of the 8HP sedan's full-throttle 1-2 upshift
/// (445 steps) as measured when the choice was added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum NewtonStart {
    /// The last sub-step's collocation polynomial, extrapolated (error `O(h^3)`; 2.68 Newton
    /// iterations a step).
    Extrapolate,
    /// The extrapolated stages moved by the linear response, through the Newton matrix, to the
    /// inputs that stepped at the step start (2.27 iterations a step). Inputs set by id
    /// ([`Simulation::set_input_id`](super::Simulation::set_input_id)) or by name hold their value over a step, so a controller
    /// that moves them (clutch pressures through a shift, a throttle cut, a driver's pedal)
    /// changes the accelerations from the step start on, which no extrapolation sees. A
    /// sliding clutch, brake or tyre scales its last stage torques by the ratio of its signal
    /// ([`FrictionLaw::torque_signal`](crate::elements::FrictionLaw::torque_signal)), a source
    /// or an engine gives its torque step ([`Law::signal_step`](crate::elements::Law::signal_step)).
    FollowInputs,
    /// A linearly implicit step on extrapolated forces (1.86 iterations a step): the reduced
    /// forces of the last sub-step's two stages and end are extrapolated to the new stages,
    /// the input steps added as in [`NewtonStart::FollowInputs`], and the extrapolated stages
    /// moved by one Newton correction computed with these forces instead of evaluated ones.
    /// Error `O(h^4)` where the motion is smooth, and a transient of a stiff mode (a sliding
    /// tyre after a clutch breaks away) is damped as the implicit step damps it, where the
    /// extrapolated speeds overshoot it. It costs a matrix-vector product, so it is switched
    /// on when a first correction misses the tolerance and kept while its own first
    /// corrections stay above 1 % of it; otherwise, while a lossy gear or a limited-slip pack
    /// slides (their law switches with the sign of a constraint torque, no smooth function of
    /// time), and for a sub-step more than four times as long as the last (the step after an
    /// event, which continues from the short rest of the step before, or a frame-time hitch:
    /// the extrapolation would amplify the forces' errors by up to the square of the ratio),
    /// the start is [`NewtonStart::FollowInputs`].
    #[default]
    Forces,
}

impl IntegrationParameters {
    /// The defaults of a vehicle ([`crate::Vehicle`], and the Bevy plugin's vehicles): these
    /// defaults without the energy ledger, which a vehicle's telemetry does not read and whose
    /// stricter Newton stop costs about a tenth of a step through a shift (see
    /// [`IntegrationParameters::track_energy`]), and with 12 mode slots instead of 32: a mode a
    /// drive cycle comes back to is found again in the shared library, not compiled again
    /// (0.1 % more instructions over 300 s of UDDS for the 8HP sedan, every result the same to
    /// the bit), and a fleet's vehicles take 10 KB less each; and with one set of Newton
    /// factors instead of two ([`IntegrationParameters::newton_sets`]: 4 KB less a sedan).
    pub fn vehicle() -> Self {
        Self { track_energy: false, mode_cache_slots: 12, newton_sets: 1, ..Self::default() }
    }
}

/// The default of [`IntegrationParameters::newton_sets`] (descriptions written before it).
fn two_sets() -> usize {
    2
}

impl Default for IntegrationParameters {
    fn default() -> Self {
        Self {
            newton_tolerance: 1e-10,
            max_newton_iterations: 20,
            event_time_tolerance: 1e-13,
            max_substeps: 256,
            mode_cache_slots: 32,
            newton_sets: 2,
            track_energy: true,
            newton_start: NewtonStart::Forces,
            max_step: 0.05,
        }
    }
}

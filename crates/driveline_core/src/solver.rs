//! The fixed-step, event-locating stick-slip solver.
//!
//! # One step
//! [`Simulation::step`] advances the network by `dt`. Inside the step:
//!
//! 1. **Mode selection** (at the start, and at every event): every friction element is `Free`
//!    (no normal force), sliding (`Forward`/`Backward`, the sign of its slip), or a *stuck
//!    candidate* (zero slip). All candidates of the network are resolved **together** as one
//!    boxed complementarity problem at acceleration level: the torques `lambda` that keep every
//!    candidate's relative acceleration at zero, each bounded by its static limit `peak tau0`.
//!    Candidates whose torque sits at the bound while their relative acceleration is non-zero
//!    break away, switch to their kinetic torque, and the problem is solved again until no
//!    more break away (a cascade that ends in at most one round per element).
//! 2. **Mode integration**: with the modes fixed the network is a smooth ODE on the null space
//!    of the active rigid constraints (gears, planetary sets, locked friction elements), so locked
//!    elements are *exactly* locked: their relative speed is zero to rounding by construction.
//!    The ODE is integrated by the 2-stage Gauss-Legendre collocation method: implicit, A-stable,
//!    order 4, symplectic. A-stability keeps stiff shafts stable at 60 Hz; order 4 keeps stiff
//!    oscillators (MSL `First`, `Backlash`, `ElasticBearing`) inside the 2e-3 regression tube at
//!    1 kHz; and Gauss quadrature makes the energy ledger close to rounding.
//! 3. **Event location**: time events (signal steps, ramp corners, pulse edges) end a sub-step
//!    exactly. State events (a slip crossing zero, a locked torque reaching its static limit, a
//!    normal force reaching or leaving zero, a backlash contact opening or closing) are detected
//!    at the stage points and the step end, located on the collocation polynomial by a safeguarded
//!    secant/bisection search, and the sub-step is recomputed to end exactly there.
//!
//! # Cheap steps
//! A run-time input change (a pedal, a load) is a time event, but when every mode and regime
//! provably stays (the current stuck torques are strictly inside their new limits, no force
//! switches on or off), the complementarity solve is skipped: it would return the same modes.
//! The stuck torques right after the change are the last step end's plus the response of the
//! constraint torques to the stepped forces, `lambda(t0+) = lambda(t0-) + T dF` (evaluated
//! afresh when that is not known); a lock past its new limit there takes the solve, as MSL's
//! event iteration would at the discontinuity, even if its torque relaxes before the first
//! stage. Likewise a group of redundant locks is only re-solved when neither its minimum-norm
//! split nor its capacity-weighted split is inside every limit. Both checks are conservative;
//! anything doubtful takes the full solve.
//!
//! The break-away screen of a sub-step samples the stages and the end; where every lock holds
//! a quarter of its limit to spare at the end, no signal can turn inside the sub-step (a sine
//! can) and the mode's fastest oscillation turns at most half a radian in it, the stage
//! samples are skipped: a lock's torque then cannot climb past its limit and fall back
//! between the samples.
//!
//! A mode whose applied torques depend on time alone (torque sources, sliding elements with a
//! constant friction coefficient; no springs, dampers, prescribed motions or redundant locks)
//! has equations of motion `Mr q' = N^T f(t)`, and its Gauss step is a quadrature. A step of
//! such a mode with no time event in it goes to the time-only kernel (module `time_only`): per
//! mode, a map from each source's magnitude to the reduced accelerations and the constraint
//! torques; per step, the source magnitudes at the two stages and the end, a few dot products,
//! and the same event tests as the general path at the same samples. The kernel hands the step
//! back untouched when a test fires, and the general path then locates the event. In such a mode
//! the general path integrates with the kernel's quadrature too, so the sub-steps of odd lengths
//! around an event need no Newton factors. Results agree with the Newton path to rounding.
//! What the kernel reads per step is prepared with the mode: each source's magnitude as a form
//! of the signals (a torque source's signal, a clutch's `k u mu` with its table read once), each
//! lock's capacity likewise, the elements whose normal force can switch inside a sub-step (not
//! those under steps and pulses, held between the time events after which the modes are
//! selected). Its commit trades the state's buffers with the end's; their ground entries are
//! equal from the start.
//!
//! A force evaluation (three a step: the two stages and the end) forms the element torques
//! alone: [`Law::force`](crate::elements::Law::force) runs each law with its Jacobian code
//! compiled out, the converter gives its torques without their partial derivatives
//! ([`ConverterMap::torques`](crate::converter::ConverterMap::torques)) and a sliding element
//! its torque without its slope
//! ([`FrictionLaw::kinetic_torque`](crate::elements::FrictionLaw::kinetic_torque)), the same
//! values bit for bit; the derivatives are formed only where a Jacobian is evaluated.
//!
//! # Where Newton starts
//! A nonlinear mode solves the stage equations by simplified Newton on a kept Jacobian. The
//! first guess of a sub-step that continues the last one in the same mode is that sub-step's
//! collocation polynomial, extrapolated (error `O(h^3)`). Two things make it miss by far more
//! than the tolerance through a shift:
//!
//! - Inputs set at run time hold their value over a step, so a controller that moves them
//!   (clutch pressures through a shift, a throttle cut, a driver's pedal, the tyre loads of a
//!   car that accelerates) steps them at every step start, and the accelerations change from
//!   there on where no extrapolation can see it. The solver records those steps and takes
//!   their linear response through the Newton matrix it already holds: a sliding clutch, brake
//!   or tyre scales its last stage torques by the ratio of its normal force or load (its
//!   torque is proportional to it), a torque source or an engine gives its torque step.
//! - A clutch that breaks away or locks starts a transient of the stiff modes (a sliding tyre's
//!   slip settles within a few milliseconds), whose curvature the extrapolated speeds
//!   overshoot. The guess is then moved by one Newton correction computed with *extrapolated
//!   forces* instead of evaluated ones: the reduced forces of the last sub-step at its two
//!   stages and its end, extrapolated by their quadratic in time, plus the input steps. This is
//!   a linearly implicit step: `O(h^4)` where the motion is smooth, and it damps a stiff
//!   transient as the implicit method does. It costs a matrix-vector product, so it is only
//!   taken while the first corrections are not far inside the tolerance (see
//!   [`NewtonStart::Forces`]).
//!
//! On the 8HP sedan's full-throttle 1-2 upshift the first correction then drops from 1e-4 ..
//! 1e-3 rad/s to 1e-7 (the tolerance is 7e-8) and Newton needs 1.86 iterations a step instead
//! of 2.68 (2.27 following the inputs alone). Only the start changes: the converged stages are
//! the same to the Newton tolerance ([`IntegrationParameters::newton_start`] chooses, for
//! comparison).
//!
//! # When Newton stops
//! With the energy ledger on (the default of a [`Simulation`]), an iteration ends when a
//! correction is itself within the tolerance: the forces it was computed from are then those
//! of the accepted stages to the tolerance, and the ledger books them. That costs a confirming
//! iteration on most steps of a shift, although its corrections are about a thousandth of the
//! first one's (the kept Jacobian is that good). Without the ledger (the default of a
//! [`crate::Vehicle`], [`IntegrationParameters::vehicle`]) an iteration may end on its
//! *contraction estimate* instead, as in Hairer and Wanner's RADAU5: the error left in the
//! corrected iterate is about `eta |dQ|` with `eta = theta / (1 - theta)`, `theta` the ratio of
//! two successive corrections on the same Jacobian; measured when a step takes a second
//! iteration, grown by 5 % a step while none measures it. The iteration ends when
//! `eta |dQ|` is below a tenth of the tolerance, for corrections within a thousand tolerances
//! (Newton's linear range). The 1-2 upshift then takes 1.08 iterations a step instead of 1.85,
//! a sixth less work, with the same shifts and events (vehicle drives agree to the tolerance
//! except where a 1e-10 difference tips a controller's threshold by a step).
//!
//! # Ambiguous locks
//! Two friction elements that lock the same relative motion (seed 001, section 6) make the stuck
//! torques non-unique. The solver takes the **minimum-norm split** (the limit of a Tikhonov
//! regularisation of the complementarity problem), so two equal clutches in parallel share the
//! torque equally. An element breaks away when no split within all static limits exists.

use crate::Signal;
use crate::elements::{Capacity, Jacobian, Law, LawState, Row};
use crate::linalg;
use crate::network::Network;

mod time_only;

/// A run-time input resolved once by [`Simulation::input_id`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputId(usize);

/// The force change of one recorded input step ([`Simulation::input_changes`]).
#[derive(Debug, Clone, Copy)]
enum InputStepChange {
    /// A law's torque steps by `d`: `+d` on the first node, `-d` on the second.
    Law(usize, usize, f64),
    /// Sliding friction element `i`'s torque changes by `ratio` times itself.
    Friction(usize, f64),
}

/// Gauss-Legendre 2-stage coefficients.
const S3: f64 = 0.288_675_134_594_812_9; // sqrt(3)/6
const C: [f64; 2] = [0.5 - S3, 0.5 + S3];
const A: [[f64; 2]; 2] = [[0.25, 0.25 - S3], [0.25 + S3, 0.25]];
const B: [f64; 2] = [0.5, 0.5];
/// `b^T A^{-1}`: the end value from converged stages without another force evaluation.
const D: [f64; 2] = [-1.732_050_807_568_877_2, 1.732_050_807_568_877_2];
/// `A^2`.
const A2: [[f64; 2]; 2] = [
    [A[0][0] * A[0][0] + A[0][1] * A[1][0], A[0][0] * A[0][1] + A[0][1] * A[1][1]],
    [A[1][0] * A[0][0] + A[1][1] * A[1][0], A[1][0] * A[0][1] + A[1][1] * A[1][1]],
];

/// Sub-steps a reused Jacobian must have served before three Newton iterations on it call for
/// a fresh one (four always do).
const JAC_PAYBACK: u32 = 8;

/// The fraction of its static limit that every lock must have to spare at a sub-step's end for
/// the break-away screen to skip the stage samples ([`Simulation::breakaway_suspects`]).
const STAGE_SAMPLE_MARGIN: f64 = 0.25;
/// The largest `omega h` (rad) of a mode's fastest oscillation at which the break-away screen
/// may skip the stage samples: a twelfth of a period, over which a torque departs from its
/// chord by at most `1 - cos(0.25)`, 3 % of its swing.
const MAX_SKIP_OMEGA_H: f64 = 0.5;

/// Growth per sub-step of Newton's contraction estimate while no second iteration measures it
/// anew (the Jacobian it was measured on ages): doubles in about fourteen sub-steps. Through
/// the 8HP sedan's shifts the measured contraction stays within a factor of ten over a
/// Jacobian's life of forty steps, where it jumps when a clutch's pressure does.
const ETA_AGEING: f64 = 1.05;

/// The fraction of the Newton tolerance that the estimated error of an iterate must be below
/// to end the iteration on the estimate: the estimate comes from an earlier iteration, and an
/// error left at the whole tolerance on every step flips more of the marginal decisions (a
/// stick-or-slide tie) than the confirmed iterates do.
const ETA_SAFETY: f64 = 0.1;

/// The largest correction, in Newton tolerances, that the contraction estimate may end an
/// iteration on: within it Newton is in its linear range (the quadratic remainder of a
/// correction of 1e-7 relative is far below the tolerance); beyond it (an input that stepped
/// hard, a lock's impact) the iterate is confirmed by another iteration.
const ETA_RANGE: f64 = 1e3;

/// Sub-steps a sine's phase is carried from one sub-step's end to the next before it is
/// evaluated afresh (rounding drifts by about an ulp per rotation: after 256, ~1e-14).
const SINE_REANCHOR: u32 = 256;

/// Where a sine signal stands between sub-steps (see `Simulation::fill_stage_signals`).
#[derive(Debug, Clone, Copy)]
struct SineState {
    /// Sub-step length the rotations are for, s.
    h: f64,
    /// `[cos, sin]` of `omega c h` for the two stages and the end (`c = 1`).
    rot: [[f64; 2]; 3],
    /// The time the last sub-step ended at, s (NaN: none to continue from).
    next: f64,
    /// Sine and cosine of the phase at `next`.
    sin: f64,
    cos: f64,
    /// Sub-steps since the phase was last evaluated afresh.
    age: u32,
    /// The signal's amplitude, offset and start time, copied from its definition when the
    /// unsteady signals are listed (the stage fill reads this record only).
    amplitude: f64,
    offset: f64,
    start_time: f64,
}

impl Default for SineState {
    fn default() -> Self {
        Self {
            h: f64::NAN,
            rot: [[1.0, 0.0]; 3],
            next: f64::NAN,
            sin: 0.0,
            cos: 1.0,
            age: 0,
            amplitude: 0.0,
            offset: 0.0,
            start_time: 0.0,
        }
    }
}

/// Every tunable of the solver, with its default, unit and trade-off.
#[derive(Debug, Clone, Copy, PartialEq)]
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
    /// [`StepStats::newton_failures`], never a panic.
    pub max_newton_iterations: usize,
    /// Event-time resolution, s (default 1e-13). Root finding stops when the bracket is smaller.
    pub event_time_tolerance: f64,
    /// Sub-steps (events) allowed in one step before the rest of the step is taken without
    /// event location (default 256). Guards against Zeno behaviour; counted in the stats.
    pub max_substeps: usize,
    /// Number of compiled modes (lock patterns) kept (default 32, at least 3). Each slot is
    /// preallocated: for the 8HP sedan (17 coordinates, 27 rows) about 18 KB. Fewer slots save
    /// memory at the price of recompiling modes a drive cycle revisits (8 slots: 0.44 MB less
    /// per 8HP sedan, about 9 times the compiles on UDDS).
    pub mode_cache_slots: usize,
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
}

/// The first guess of the stage velocities of a nonlinear mode's sub-step that continues the
/// last one in the same mode ([`IntegrationParameters::newton_start`]). Each choice builds on
/// the one before; the iteration counts are of the 8HP sedan's full-throttle 1-2 upshift
/// (445 steps) as measured when the choice was added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NewtonStart {
    /// The last sub-step's collocation polynomial, extrapolated (error `O(h^3)`; 2.68 Newton
    /// iterations a step).
    Extrapolate,
    /// The extrapolated stages moved by the linear response, through the Newton matrix, to the
    /// inputs that stepped at the step start (2.27 iterations a step). Inputs set by id
    /// ([`Simulation::set_input_id`]) or by name hold their value over a step, so a controller
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
    /// [`IntegrationParameters::track_energy`]).
    pub fn vehicle() -> Self {
        Self { track_energy: false, ..Self::default() }
    }
}

impl Default for IntegrationParameters {
    fn default() -> Self {
        Self {
            newton_tolerance: 1e-10,
            max_newton_iterations: 20,
            event_time_tolerance: 1e-13,
            max_substeps: 256,
            mode_cache_slots: 32,
            track_energy: true,
            newton_start: NewtonStart::Forces,
        }
    }
}

/// Friction element mode, with the MSL integer codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    fn dir(self) -> f64 {
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

/// Where an element's reported mode comes from.
#[derive(Debug, Clone, Copy)]
enum ModeSource {
    /// No mode (inertias, springs, sources...).
    None,
    /// Friction element `k`.
    Friction(usize),
    /// Kinematic clutch `j`.
    Kinematic(usize),
    /// A LossyGear without losses: an ideal gear, MSL mode 2 (free).
    Ideal,
    /// Elastic clutch law `k`.
    Law(usize),
}

/// One compiled mode: the null space of the active rigid constraints and what follows from it.
#[derive(Debug, Clone)]
struct ModeSlot {
    key: u64,
    /// Bumped on every compile, so data derived from a slot can tell it is stale.
    generation: u64,
    valid: bool,
    age: u64,
    m: usize,
    /// Active rows: permanent rows then locked friction rows; `r` of them.
    r: usize,
    /// Null-space basis `n x m` (stride `n_dof`), identity on the free columns.
    nmat: Vec<f64>,
    /// The non-zeros of `nmat` as `(row, column, value)`, by ascending rows, then columns. Gear
    /// chains make `N` sparse: most dependent speeds follow one free speed, so the per-step
    /// product `N q` runs over this list (in this order, which fixes the rounding); `N^T f`
    /// runs over the dense rows of `nmat` for up to eight free coordinates and over `nzt`
    /// beyond ([`ModeSlot::nt_times`]), to the same sums.
    nz: CapVec<(u32, u32, f64)>,
    /// Row `k` of `N` is `nz[nz_row[k]..nz_row[k + 1]]` (`n + 1` offsets).
    nz_row: Vec<u32>,
    /// The same non-zeros by columns, `(row, value)` by ascending rows within a column:
    /// column `j` is `nzt[nzt_col[j]..nzt_col[j + 1]]`. `N^T f` sums each of its entries over
    /// this list, in the order a pass over `nz` would add to it, and keeps it in a register.
    nzt: CapVec<(u32, f64)>,
    nzt_col: Vec<u32>,
    /// Every row of `N` has at most one non-zero (no planetary set or differential ties a
    /// speed to two free ones): `gather[k]` is row `k`'s `(column, value)`, `u32::MAX` for an
    /// empty row.
    nz_single: bool,
    gather: Vec<(u32, f64)>,
    free_cols: Vec<usize>,
    /// Reduced inertia `Mr = N^T M N` (`m x m`) and its LU factors.
    mr: Vec<f64>,
    mr_lu: Vec<f64>,
    mr_piv: Vec<usize>,
    /// Constraint torques directly from forces: `lambda = T (f - M u)` with
    /// `T = L (M N Mr^-1 N^T - I)` (`r x n`), `u` the prescribed acceleration. Stored by
    /// columns (column `k` at `k * rstride`): forces are sparse, so the product runs over the
    /// columns of the non-zero forces, each a contiguous `r`-vector. [`MAP_PAD`] entries past
    /// the last column let a product read whole lanes of four ([`map_columns_from`]).
    tmap: Vec<f64>,
    /// Column stride of `tmap` and `tmap_w` (the largest row count of the network).
    rstride: usize,
    /// Redundant slots only: the same map for a capacity-weighted split (regularisation
    /// `eps_i = eps (c_max / c_i)^2` per row, clamped to `[1, 1e6] eps`, capacities at compile
    /// time), which loads the stronger of two parallel locks. A certificate only: telemetry
    /// keeps the minimum-norm split.
    tmap_w: Vec<f64>,
    /// The permanent rows whose torques the locked elements' limits read (a limited-slip
    /// pack's input rows, a LossyGear's gear row). With `stage_rows_all` false, the stage
    /// constraint torques are evaluated on these and the lock rows only: the stage samples
    /// serve the break-away tests (per element, or a redundant group's minimum-norm
    /// certificate), which read nothing else.
    stage_extra: CapVec<u32>,
    /// Evaluate every row at the stages: the work of prescribed rows reads theirs, and their
    /// accelerations enter the map.
    stage_rows_all: bool,
    /// Friction index of each locked row (after the permanent rows).
    locked: CapVec<usize>,
    /// Kinematic clutch index of each engaged row (after the locked friction rows).
    kin: CapVec<usize>,
    /// Rows with a prescribed right-hand side `row . w = rho(t)`: (active row, source).
    rhs: CapVec<(usize, Rhs)>,
    /// Particular solution of each rhs row for a unit `rho` (`n` each), zero on free columns.
    pmat: Vec<f64>,
    linear: bool,
    /// Some active rows repeat others (two locks on one relative motion): the lock torques are
    /// then checked by the complementarity problem, not per element.
    redundant: bool,
    dr: Vec<f64>,
    kr: Vec<f64>,
    /// A bound on the squared angular frequency of the mode's fastest oscillation at its last
    /// Jacobian, 1/s^2: `||Mr^-1 Kr||_inf` (infinite until a Jacobian is evaluated).
    omega2: f64,
    newton_h: f64,
    /// The inverse of the Newton matrix for step `newton_h` (`2m x 2m`; its LU factors while
    /// it is formed, pivots in `newton_piv`).
    newton_inv: Vec<f64>,
    newton_piv: Vec<usize>,
    /// The mode epoch ([`Simulation::epoch`]) `dr`/`kr` were evaluated in: a nonlinear mode
    /// reuses its Jacobian (and the Newton factors) over the steps of one epoch while the
    /// iteration contracts fast.
    jac_epoch: u64,
    /// The last Newton iteration converged slowly on the reused Jacobian: refresh it.
    jac_stale: bool,
    /// Sub-steps integrated on the current Jacobian since it was evaluated.
    jac_uses: u32,
}

impl ModeSlot {
    /// `w = N q` (the node speeds for reduced speeds `q`) into `w[..n]`. A row sums its terms
    /// from -0.0 in ascending columns (so a row of one term is that term, sign of zero kept).
    #[inline]
    fn n_times(&self, q: &[f64], w: &mut [f64]) {
        // (Not `n_times_each::<1>`: its arrays of slices cost CoupledClutches 2 % of its
        // instructions.)
        if self.nz_single {
            // (-0.0 + x is x for every x: the one term is the row's sum.)
            for (w, &(j, c)) in w.iter_mut().zip(&self.gather) {
                *w = q.get(j as usize).map_or(-0.0, |q| c * q);
            }
            return;
        }
        w.fill(-0.0);
        for &(k, j, c) in self.nz.iter() {
            w[k as usize] += c * q[j as usize];
        }
    }

    /// [`ModeSlot::n_times`] of the two stages and the end at once (the time-only kernel's
    /// three samples), in one pass over `N`: each result exactly as `n_times` forms it.
    #[inline(always)]
    fn n_times3(&self, q: [&[f64]; 3], w: [&mut [f64]; 3]) {
        let [q0, q1, q2] = q;
        let [w0, w1, w2] = w;
        if self.nz_single {
            let m = q0.len().min(q1.len()).min(q2.len());
            let (q0, q1, q2) = (&q0[..m], &q1[..m], &q2[..m]);
            for (((w0, w1), w2), &(j, c)) in w0.iter_mut().zip(w1.iter_mut()).zip(w2.iter_mut()).zip(&self.gather) {
                let j = j as usize;
                (*w0, *w1, *w2) = if j < m { (c * q0[j], c * q1[j], c * q2[j]) } else { (-0.0, -0.0, -0.0) };
            }
            return;
        }
        self.n_times(q0, w0);
        self.n_times(q1, w1);
        self.n_times(q2, w2);
    }

    /// [`ModeSlot::n_times`] of `K` vectors at once (the two stages), in one pass over `N`:
    /// each result exactly as `n_times` forms it.
    #[inline]
    fn n_times_each<const K: usize>(&self, q: [&[f64]; K], w: [&mut [f64]; K]) {
        let mut w = w;
        if self.nz_single {
            // (-0.0 + x is x for every x: the one term is the row's sum.)
            let n = w[0].len();
            for (k, &(j, c)) in self.gather[..n].iter().enumerate() {
                for (w, q) in w.iter_mut().zip(q) {
                    w[k] = q.get(j as usize).map_or(-0.0, |q| c * q);
                }
            }
            return;
        }
        for w in w.iter_mut() {
            w.fill(-0.0);
        }
        for &(k, j, c) in self.nz.iter() {
            for (w, q) in w.iter_mut().zip(q) {
                w[k as usize] += c * q[j as usize];
            }
        }
    }

    /// `g = N^T x` (the reduced forces of node forces `x`) into `g[..m]`: each entry sums its
    /// terms from +0.0 in ascending rows.
    #[inline]
    fn nt_times(&self, x: &[f64], g: &mut [f64]) {
        match self.m {
            1 => return self.nt_times_dense::<1>(x, g),
            2 => return self.nt_times_dense::<2>(x, g),
            3 => return self.nt_times_dense::<3>(x, g),
            4 => return self.nt_times_dense::<4>(x, g),
            5 => return self.nt_times_dense::<5>(x, g),
            6 => return self.nt_times_dense::<6>(x, g),
            7 => return self.nt_times_dense::<7>(x, g),
            8 => return self.nt_times_dense::<8>(x, g),
            _ => {}
        }
        for (j, g) in g[..self.m].iter_mut().enumerate() {
            let col = &self.nzt[self.nzt_col[j] as usize..self.nzt_col[j + 1] as usize];
            *g = col.iter().fold(0.0, |acc, &(k, c)| acc + c * x[k as usize]);
        }
    }

    /// [`ModeSlot::nt_times`] for `M = m` columns over the dense rows of `N`, in registers:
    /// the zero entries' terms are signed zeros, which change no sum that starts from +0.0
    /// (a finite `x` assumed: a step with a non-finite force fails either way), so each entry
    /// is the sparse sum, bit for bit.
    #[inline]
    fn nt_times_dense<const M: usize>(&self, x: &[f64], g: &mut [f64]) {
        let n = self.nz_row.len() - 1;
        let mut acc = [0.0; M];
        for (row, &xk) in self.nmat.chunks_exact(n).zip(&x[..n]) {
            let row = &row[..M];
            for j in 0..M {
                acc[j] += row[j] * xk;
            }
        }
        g[..M].copy_from_slice(&acc);
    }

    /// Grows the `m x m` and `2m x 2m` buffers to hold a mode with `m` free coordinates.
    fn reserve(&mut self, m: usize) {
        if self.mr.len() < m * m {
            for b in [&mut self.mr, &mut self.mr_lu, &mut self.dr, &mut self.kr] {
                b.resize(m * m, 0.0);
            }
            self.newton_inv.resize(4 * m * m, 0.0);
            self.mr_piv.resize(m, 0);
            self.newton_piv.resize(2 * m, 0);
        }
    }

    /// A slot for a network of `n` coordinates and at most `rmax` active rows, `nrhs` of them
    /// with a prescribed right-hand side, whose modes keep at most `mmax` free coordinates (the
    /// `m x m` and `2m x 2m` matrices are sized by it).
    fn new(n: usize, mmax: usize, rmax: usize, nrhs: usize, nf: usize) -> Self {
        Self {
            key: 0,
            generation: 0,
            valid: false,
            age: 0,
            m: 0,
            r: 0,
            nmat: vec![0.0; n * n],
            nz: CapVec::new(n * mmax),
            nz_row: vec![0; n + 1],
            nzt: CapVec::new(n * mmax),
            nzt_col: vec![0; n + 1],
            nz_single: false,
            gather: vec![(u32::MAX, 0.0); n],
            free_cols: vec![0; n],
            mr: vec![0.0; mmax * mmax],
            mr_lu: vec![0.0; mmax * mmax],
            mr_piv: vec![0; mmax],
            tmap: vec![0.0; rmax * n + MAP_PAD],
            rstride: rmax,
            tmap_w: vec![0.0; rmax * n + MAP_PAD],
            stage_extra: CapVec::new(2 * nf),
            stage_rows_all: true,
            locked: CapVec::new(nf),
            kin: CapVec::new(rmax),
            rhs: CapVec::new(nrhs),
            pmat: vec![0.0; nrhs * n],
            linear: false,
            redundant: false,
            dr: vec![0.0; mmax * mmax],
            kr: vec![0.0; mmax * mmax],
            omega2: f64::INFINITY,
            newton_h: f64::NAN,
            newton_inv: vec![0.0; 4 * mmax * mmax],
            newton_piv: vec![0; 2 * mmax],
            jac_epoch: u64::MAX,
            jac_stale: true,
            jac_uses: 0,
        }
    }
}

impl Work {
    /// The signal buffers `sig[0]`, `sig[1]`, `sig[2]`, `sig_end`, by index 0 to 3.
    fn signal_buffers(&mut self) -> [&mut Vec<f64>; 4] {
        let [s0, s1, s2] = &mut self.sig;
        [s0, s1, s2, &mut self.sig_end]
    }

    /// Signal buffer `b` (see [`Work::signal_buffers`]).
    fn signal_buffer(&mut self, b: usize) -> &mut Vec<f64> {
        if b == 3 { &mut self.sig_end } else { &mut self.sig[b] }
    }
}

/// Preallocated scratch buffers.
#[derive(Debug, Clone)]
struct Work {
    sig: [Vec<f64>; 3],
    f: Vec<f64>,
    fq: Vec<f64>,
    /// The non-zero entries of a force vector, `(node, value)` ascending (`n` slots).
    xnz: Vec<(u32, f64)>,
    /// Located slip-reversal and break-away thetas of the sub-step being searched (valid where
    /// its masks say).
    slip_theta: Vec<f64>,
    phi_st: [Vec<f64>; 2],
    w_st: [Vec<f64>; 2],
    q0: Vec<f64>,
    q: Vec<f64>,
    res: Vec<f64>,
    phi1: Vec<f64>,
    w1: Vec<f64>,
    phi_e: Vec<f64>,
    w_e: Vec<f64>,
    acc: Vec<f64>,
    gq: Vec<f64>,
    jphi: Vec<f64>,
    jw: Vec<f64>,
    tmp_rr: Vec<f64>,
    tmp_rr_w: Vec<f64>,
    piv_w: Vec<usize>,
    lam_w: Vec<f64>,
    /// Constraint torques at a step start right after an input change (`r`).
    lam_start: Vec<f64>,
    tmp_rn: Vec<f64>,
    /// `G` transposed (`n x r`) during a mode compilation.
    tmp_nr: Vec<f64>,
    /// The weighted constraint-torque map's right-hand sides (`r x n`) during a mode
    /// compilation.
    tmp_rn_w: Vec<f64>,
    /// `Mr^-1 N^T` (`m x n`, `m <= n`) during a mode compilation.
    tmp_mn: Vec<f64>,
    piv: Vec<usize>,
    lam: Vec<f64>,
    // complementarity problem
    qp_w: Vec<f64>,
    qp_b: Vec<f64>,
    qp_x: Vec<f64>,
    qp_lo: Vec<f64>,
    qp_hi: Vec<f64>,
    qp_state: Vec<i8>,
    /// Last complementarity solution per friction element (warm start of the next solve).
    warm_x: Vec<f64>,
    warm_state: Vec<i8>,
    warm_ok: Vec<bool>,
    qp_idx: Vec<usize>,
    qp_fact: Vec<f64>,
    qp_rhs: Vec<f64>,
    qp_piv: Vec<usize>,
    /// What `qp_fact`/`qp_piv` hold: the LU factors of the free block (mask over positions in
    /// `qp_idx`, `u64::MAX` when none) of the matrix identified by `qp_matrix`
    /// (base slot key, its generation, candidate mask). A solve on the same matrix and free set
    /// reuses them: bitwise the factors a fresh factorisation would give.
    qp_factored: u64,
    qp_matrix: (u64, u64, u64),
    /// The Tikhonov term on the diagonal of `qp_w`.
    qp_eps: f64,
    caps: Vec<Capacity>,
    new_modes: Vec<FrictionMode>,
    candidate: Vec<bool>,
    /// Left-limit signal values at the end of the integrated sub-step.
    sig_end: Vec<f64>,
    /// Prescribed-motion parts of the speeds (`P rho`) and accelerations (`P rho'`) at the two
    /// stages and the end of the sub-step, and at a dense/now point (index 3).
    wp: [Vec<f64>; 4],
    ud: [Vec<f64>; 4],
    /// Augmented matrix for the mode compilation `[G | I]`.
    aug: Vec<f64>,
    /// The compiled mode's constraint-force map `L` (`r x n`, `lambda = L (M a - f)`), stored
    /// by columns (`n x r`), from which the compilation derives the slot's `tmap`.
    lmap: Vec<f64>,
    /// Scratch of the torque-dependent correction (LossyGear, limited slip), the friction torque
    /// it solved per element, and the estimates of the torque each limit depends on (a lossy
    /// gear's transmitted torque, a limited-slip pack's input torque), per friction element.
    ls_a: Vec<f64>,
    dep_tau: Vec<f64>,
    dependent_input: Vec<f64>,
    /// Generalised forces of the elements released during one mode selection.
    qp_extra: Vec<f64>,
    /// Forces at the converged stages and at the sub-step end (valid while `cache` says so).
    f_st: [Vec<f64>; 2],
    f_end: Vec<f64>,
    /// Constraint torques at the stages and the end.
    lam_st: [Vec<f64>; 2],
    lam_end: Vec<f64>,
    /// Which of the per-sub-step caches are filled: bit 0 stage forces, bit 1 stage torques,
    /// bit 2 end forces and torques.
    cache: u8,
    /// A sub-step's own inverse Newton matrix (an event-cut size), as in [`ModeSlot`].
    newton_inv: Vec<f64>,
    newton_piv: Vec<usize>,
    /// The inverse of a Newton matrix being formed, then a column of the identity
    /// (`4 n^2 + 2 n`).
    newton_tmp: Vec<f64>,
    phi_save: Vec<f64>,
    w_save: Vec<f64>,
    /// The last committed sub-step in reduced coordinates (start `q0`, stages `Q1 Q2`), its
    /// size, slot and epoch: the predictor of the next sub-step's stages.
    pred_q0: Vec<f64>,
    pred_q: Vec<f64>,
    /// Reduced forces `N^T f` at the two stages of the last committed sub-step (valid when
    /// `pred_g_ok`), and scratch for the reduced force at its end.
    pred_g: Vec<f64>,
    pred_ge: Vec<f64>,
    pred_g_ok: bool,
    /// The integrated sub-step's Newton iteration left its stage forces in `gq`.
    stage_g_ok: bool,
    /// The next sub-step starts from forces ([`NewtonStart::Forces`]): switched on when a
    /// first Newton correction misses the tolerance, kept while the force start's first
    /// corrections are above 1 % of it.
    force_start: bool,
    /// The integrated sub-step started from forces.
    started_from_forces: bool,
    /// Newton's contraction estimate `eta = theta / (1 - theta)` (`theta`: the ratio of two
    /// successive corrections): the error left in an iterate is about `eta` times the
    /// correction that made it. Infinite when unknown.
    newton_eta: f64,
    pred_h: f64,
    pred_slot: usize,
    pred_epoch: u64,
    law_power: [Vec<f64>; 2],
    law_diss: [Vec<f64>; 2],
    fric_power: [Vec<f64>; 2],
    /// Sliding friction torques at the stages of the last force evaluation (the stage
    /// predictor scales them when their signal steps).
    fric_tau: [Vec<f64>; 2],
    /// Friction powers and torque-dependent friction torques at the sub-step end (from
    /// [`Simulation::end_torques`]; `dep_tau` is scratch that stage evaluations overwrite).
    fric_power_end: Vec<f64>,
    dep_tau_end: Vec<f64>,
    /// Law torques and dissipations and sliding friction torques at the sub-step end (from
    /// [`Simulation::end_torques`]): the telemetry of a clean step end, not evaluated twice.
    law_tau_end: Vec<f64>,
    law_diss_end: Vec<f64>,
    fric_tau_end: Vec<f64>,
}

/// A running simulation of one [`Network`].
#[derive(Debug, Clone)]
pub struct Simulation {
    net: Network,
    params: IntegrationParameters,
    t: f64,
    phi: Vec<f64>,
    w: Vec<f64>,
    modes: Vec<FrictionMode>,
    regimes: Vec<LawState>,
    /// Kinematic clutches: engaged (row active), and the mode they report.
    kin_engaged: Vec<bool>,
    kin_modes: Vec<FrictionMode>,
    slots: Vec<ModeSlot>,
    cur: usize,
    clock: u64,
    /// Complementarity data under the base constraints (permanent rows and engaged kinematic
    /// clutches): `W` (nf x nf) and `B` (nf x n), rebuilt at each mode selection with candidates.
    qp_full: Vec<f64>,
    qp_bmap: Vec<f64>,
    /// `(key, generation)` of the base slot `qp_full` and `qp_bmap` were derived from.
    qp_tag: Option<(u64, u64)>,
    next_time_event: f64,
    /// Elements whose located break-away event is being resolved: at their static bound they
    /// break away even if the excess is still within rounding.
    breaking: u64,
    /// Bit `i` set when friction element `i` slides (Forward or Backward): the elements whose
    /// kinetic torque a force evaluation adds.
    sliding: u64,
    /// An input changed since the last step: re-resolve modes at the next step start.
    inputs_changed: bool,
    /// The inputs that stepped since the last step, set by id or by name as a whole signal:
    /// `(signal, value before, value now)` at the step start, for the stage predictor
    /// ([`Simulation::input_step_forces`]). An input inside another signal is not followed.
    /// The force changes of `input_steps` ([`Simulation::input_changes`]), formed once per step
    /// by the first reader (the start-of-step lock test or the stage predictor).
    input_changes: CapVec<InputStepChange>,
    /// `input_changes` holds this step's record, and every stepped input's force change is in
    /// it (`.1`).
    input_changes_ready: (bool, bool),
    input_steps: CapVec<(u32, f64, f64)>,
    /// Per signal, the position of its step in `input_steps` (`u32::MAX`: none).
    input_step_pos: Vec<u32>,
    /// The laws whose input each signal is ([`Law::input_signal`]): signal `k`'s are
    /// `input_laws[input_law_start[k]..input_law_start[k + 1]]`.
    input_law_start: Vec<u32>,
    input_laws: Vec<u32>,
    /// The next sub-step is the first since input steps: its predictor follows them.
    input_jump: bool,
    /// The indices of the signals that are not steady ([`Signal::is_steady`]; capacity: every
    /// signal, so a recount never allocates). With none, a filled signal buffer stays valid
    /// until the next change of a signal.
    unsteady: CapVec<u32>,
    /// The unsteady signals a sub-step's stage fill evaluates one by one: all but the sines,
    /// which [`Simulation::fill_stage_signals`] rotates from one sine and cosine a sub-step,
    /// and the steps and pulses, which it evaluates once per time event.
    unsteady_other: CapVec<u32>,
    /// The unsteady signals that are sines.
    sines: CapVec<u32>,
    /// The unsteady signals that are steps or pulses: constant between their time events.
    held: CapVec<u32>,
    /// Per signal (used by the steps and pulses): `(time_events, value)`, the value it held
    /// after the time event of that count.
    held_value: Vec<(u64, f64)>,
    /// The time-event count at which every held value was last brought up to date
    /// (`u64::MAX`: never, or the list of held signals changed since).
    held_events: u64,
    /// The stage buffers (bits 0, 1 and 3 of [`Work::signal_buffers`]) whose entries of the held
    /// signals are the values of `held_events`: written by a stage fill, cleared by any fill
    /// that writes those entries otherwise.
    held_in: u8,
    /// Time events passed so far.
    time_events: u64,
    /// Per signal (used by the sines): where its sine stands, see [`SineState`].
    sine_state: Vec<SineState>,
    /// Bumped at every change of a signal's definition or value (what depends on the signals,
    /// such as the cached capacities, is stale).
    sig_gen: u64,
    /// The generation of the signal buffers' steady values: bumped with `sig_gen`, except
    /// when an input set by its id is patched into the buffers in place.
    buf_gen: u64,
    /// The `buf_gen` at which each signal buffer (`sig[0]`, `sig[1]`, `sig[2]`, `sig_end`) was
    /// filled: its steady signals are valid while the generation holds (the unsteady ones are
    /// evaluated at every fill); `u64::MAX` when it must be evaluated again.
    sig_filled: [u64; 4],
    /// `(sig_gen, epoch)` at which `ws.caps` last held the stuck elements' capacities under
    /// steady signals (group tests reuse them at every sample of the epoch).
    caps_key: (u64, u64),
    /// `sig_gen` at which `ws.caps` last held every friction element's capacity (a mode
    /// selection or a completed input-change test); with steady signals break-away samples
    /// read them instead of evaluating the law again.
    caps_all_gen: u64,
    /// The friction elements whose capacity inputs set by id changed since `caps_all_gen`,
    /// as a mask (`None` when something else changed too): an input-change test re-evaluates
    /// only these.
    caps_stale: Option<u64>,
    /// For each signal, the friction elements whose law reads it (their normal force or
    /// load), as a mask.
    readers: Vec<u64>,
    /// Bumped at every mode selection (modes, regimes or the state may switch there): the
    /// stage predictor, the reused Jacobians of nonlinear modes and the cached group
    /// capacities are valid within one epoch.
    epoch: u64,
    /// The friction elements whose normal force (or load) is an unsteady signal, as a mask:
    /// only these can engage or release inside a sub-step (a steady force that changes is an
    /// input change, tested at the step start).
    force_watch: u64,
    /// The elements of `force_watch` with the signal each one's normal force reads, `(element,
    /// signal)` in element order, but for signals held between time events (steps and pulses,
    /// which cannot turn an element on or off inside a sub-step): the time-only kernel's
    /// engage and release test reads them without going through the law.
    watch_list: CapVec<(u32, u32)>,
    /// Some time-varying signal may rise and fall back inside a sub-step (a sine, see
    /// [`Signal::is_linear_between_events`]): the break-away screen always takes the stage
    /// samples then.
    signals_turn: bool,
    /// The free friction elements, as a mask (with `sliding`, kept by the mode selection).
    free: u64,
    /// The free elements whose output torque the last output update zeroed.
    out_free: u64,
    /// The LossyGear friction elements, as a mask.
    lossy: u64,
    /// [`Simulation::slips_at_zero`] of the present state and modes, when known (computed at
    /// the end of an event-free sub-step; a mode selection forgets it).
    zero_slips: Option<u64>,
    /// The friction elements whose sliding torque depends on the constraint torques (rolling
    /// LossyGears, limited-slip packs), as a mask: the force pipeline corrects for those that
    /// slide.
    torque_dependent: u64,
    /// Every law's force reads the signals only ([`Law::is_state_free`]).
    laws_state_free: bool,
    /// Some law's force reads angles ([`Law::reads_angles`]): Newton iterations need the
    /// stage angles, not only the stage speeds.
    laws_read_angles: bool,
    /// The friction elements whose sliding torque reads the signals only
    /// ([`FrictionLaw::is_time_only`](crate::elements::FrictionLaw::is_time_only)), as a mask. With `laws_state_free`, a mode where only
    /// these slide has forces that depend on time alone.
    time_only: u64,
    /// The time-only kernel of the current mode ([`time_only`]).
    kernel: time_only::TimeOnly,
    /// The stage signals of the sub-step about to be integrated are in place (the kernel
    /// filled them, then handed the sub-step to the general path).
    stage_signals_ready: bool,
    started: bool,
    /// The permanent rows that report a torque, as `(row, element, coefficient)`: a gear
    /// reports `flange_b.tau = -c_b lambda`, a speed source `lambda` (derived once from the
    /// element kinds, not matched by name every step).
    row_outputs: Vec<(usize, usize, f64)>,
    /// Where each element's mode comes from (see [`Simulation::element_mode`]).
    mode_sources: Vec<ModeSource>,
    /// Each element's relative-coordinate row, copied out of the network's element records
    /// (176 bytes each, name and flange list included) into an array of its own, which the
    /// per-step readers (controllers, telemetry, the ECS write-back) touch line by line.
    out_rel: Vec<Option<Row>>,
    /// Each element's body node (Inertia, Mass), likewise.
    out_body: Vec<Option<u32>>,
    ws: Work,
    events: CapVec<ModeEvent>,
    stats: StepStats,
    energy: EnergyLedger,
    /// Per element: torque, relative speed, relative angle, power at the last step end.
    out_tau: Vec<f64>,
    /// Power each element dissipates at the last step end, W.
    out_power: Vec<f64>,
}

/// A vector with a reserved capacity that survives cloning, so that a cloned simulation (a
/// snapshot) steps without allocating and records events exactly like the original.
#[derive(Debug)]
struct CapVec<T> {
    v: Vec<T>,
    cap: usize,
}

impl<T> CapVec<T> {
    fn new(cap: usize) -> Self {
        Self { v: Vec::with_capacity(cap), cap }
    }
    /// True while a push stays within the reserved capacity.
    fn has_room(&self) -> bool {
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

/// Records that input signal `k` steps from `from` (its value now, before the change) to `to`
/// for the stage predictor ([`Simulation::input_step_forces`]): a second change of the same
/// input before the next step keeps the first value before. (There is room for every signal.)
fn record_input_step(steps: &mut CapVec<(u32, f64, f64)>, pos: &mut [u32], k: usize, from: f64, to: f64) {
    match pos[k] {
        u32::MAX if steps.has_room() => {
            pos[k] = steps.len() as u32;
            steps.push((k as u32, from, to));
        }
        u32::MAX => {}
        p => steps[p as usize].2 = to,
    }
}

/// Signals and laws are evaluated against these.
fn eval_signals(net: &Network, t: f64, left: bool, out: &mut [f64]) {
    for (k, s) in net.signals.iter().enumerate() {
        out[k] = if left { s.eval_left(t) } else { s.eval(t) };
    }
}

impl Simulation {
    /// Fills signal buffer `b` (`sig[0]`, `sig[1]`, `sig[2]`, or `sig_end` for 3) with the
    /// signals at `t` (`left`: the limit from the left). The steady signals of a buffer filled
    /// since the last change are kept (an empty buffer copies them from a filled one); only
    /// the unsteady ones (ramping inputs, sines, tables...) are evaluated again.
    fn fill_signals(&mut self, b: usize, t: f64, left: bool) {
        self.fill_signals_but(b, t, left, false);
    }

    /// [`Simulation::fill_signals`], leaving out, when `rest_only`, the signals
    /// [`Simulation::fill_stage_signals`] writes itself (sines, steps and pulses).
    fn fill_signals_but(&mut self, b: usize, t: f64, left: bool, rest_only: bool) {
        // Every path below but the `rest_only` pass over a filled buffer writes the held
        // signals' entries.
        if !rest_only || self.sig_filled[b] != self.buf_gen {
            self.held_in &= !(1 << b);
        }
        if self.sig_filled[b] != self.buf_gen {
            if let Some(src) = (0..4).find(|&k| self.sig_filled[k] == self.buf_gen) {
                let mut bufs = self.ws.signal_buffers();
                let (from, to) = if src < b {
                    let (lo, hi) = bufs.split_at_mut(b);
                    (&*lo[src], &mut *hi[0])
                } else {
                    let (lo, hi) = bufs.split_at_mut(src);
                    (&*hi[0], &mut *lo[b])
                };
                to.copy_from_slice(from);
            } else {
                let out = self.ws.signal_buffer(b);
                eval_signals(&self.net, t, left, out);
                self.sig_filled[b] = self.buf_gen;
                return;
            }
            self.sig_filled[b] = self.buf_gen;
        }
        // The steady signals are those of the buffer; the others are evaluated at `t`.
        let out = self.ws.signal_buffer(b);
        let list = if rest_only { &self.unsteady_other } else { &self.unsteady };
        for &k in list.iter() {
            let s = &self.net.signals[k as usize];
            out[k as usize] = if left { s.eval_left(t) } else { s.eval(t) };
        }
    }

    /// The signals of a sub-step of length `h` from `t0`: its two stages (`sig[0]`, `sig[1]`)
    /// and the left limit at its end (`sig_end`). A sine's phase at the stages and the end is
    /// its phase at `t0` turned by `omega c h` (rotations kept while `h` is); its phase at `t0`
    /// is where the last sub-step's end left it when this sub-step continues it, and is
    /// evaluated afresh at least every [`SINE_REANCHOR`] sub-steps (rounding drifts by about an
    /// ulp per rotation). The values agree with evaluating each time to rounding; a sub-step
    /// lies on one side of the sine's start time (a time event).
    #[inline(always)]
    fn fill_stage_signals(&mut self, t0: f64, h: f64) {
        let rest_only = !self.sines.is_empty() || !self.held.is_empty();
        // A step or a pulse changes only at its edges, time events that end sub-steps: inside
        // a sub-step and at its end's left limit it holds the value it took after the last
        // time event, evaluated once then (at a stage time, strictly after that event).
        if self.held_events != self.time_events {
            for &k in self.held.iter() {
                let k = k as usize;
                let (seen, v) = &mut self.held_value[k];
                if *seen != self.time_events {
                    *seen = self.time_events;
                    *v = self.net.signals[k].eval(t0 + C[0] * h);
                }
            }
            self.held_events = self.time_events;
            self.held_in = 0;
        }
        // Buffers filled since the last change need only their unsteady signals, and with
        // rest_only the loop below writes those of the common kinds itself.
        let rest = if rest_only { &self.unsteady_other } else { &self.unsteady };
        let nothing_left = rest.is_empty() && [0, 1, 3].iter().all(|&b| self.sig_filled[b] == self.buf_gen);
        if !nothing_left {
            for i in 0..2 {
                self.fill_signals_but(i, t0 + C[i] * h, false, rest_only);
            }
            self.fill_signals_but(3, t0 + h, true, rest_only);
        }
        // (The buffers are cut once: a store through one does not make the others reload.)
        let Work { sig, sig_end, .. } = &mut self.ws;
        let [s0, s1, _] = sig;
        let (s0, s1, se) = (&mut s0[..], &mut s1[..], &mut sig_end[..]);
        // (Buffers that already hold them, since the last time event, keep them.)
        if self.held_in != 0b1011 {
            for &k in self.held.iter() {
                let k = k as usize;
                let v = self.held_value[k].1;
                (s0[k], s1[k], se[k]) = (v, v, v);
            }
            self.held_in = 0b1011;
        }
        for &k in self.sines.iter() {
            let k = k as usize;
            let st = &mut self.sine_state[k];
            let (amplitude, offset) = (st.amplitude, st.offset);
            if t0 < st.start_time {
                (s0[k], s1[k], se[k]) = (offset, offset, offset);
                st.next = f64::NAN;
                continue;
            }
            // Steps of `k dt - t` differ from `dt` by rounding: their rotations differ by less
            // than 1e-16 rad, and are reused (as the Newton factors are).
            // (A NaN `st.h`, never set, compares false and sets them.)
            let same_h = (h - st.h).abs() <= 1e-12 * h;
            let (sin0, cos0) = if same_h && st.next.to_bits() == t0.to_bits() && st.age < SINE_REANCHOR {
                st.age += 1;
                (st.sin, st.cos)
            } else {
                Self::sine_restart(&self.net.signals[k], st, t0, h, same_h)
            };
            let turn = |[cs, sn]: [f64; 2]| (sin0 * cs + cos0 * sn, cos0 * cs - sin0 * sn);
            let (a, b, e) = (turn(st.rot[0]), turn(st.rot[1]), turn(st.rot[2]));
            s0[k] = offset + amplitude * a.0;
            s1[k] = offset + amplitude * b.0;
            se[k] = offset + amplitude * e.0;
            (st.next, st.sin, st.cos) = (t0 + h, e.0, e.1);
        }
    }

    /// A sine's rotations for a new sub-step length `h` (unless `same_h`) and its phase at
    /// `t0` evaluated afresh: the rare branch of [`Simulation::fill_stage_signals`].
    #[cold]
    #[inline(never)]
    fn sine_restart(signal: &Signal, st: &mut SineState, t0: f64, h: f64, same_h: bool) -> (f64, f64) {
        let Signal::Sine { f, phase, start_time, .. } = *signal else { return (st.sin, st.cos) };
        if !same_h {
            let omega = crate::signal::angular(f);
            st.h = h;
            for (r, c) in st.rot.iter_mut().zip([C[0], C[1], 1.0]) {
                let (sn, cs) = (omega * c * h).sin_cos();
                *r = [cs, sn];
            }
            // (A sub-step of a new length continues the phase: only the rotations change.)
            if st.next.to_bits() == t0.to_bits() && st.age < SINE_REANCHOR {
                st.age += 1;
                return (st.sin, st.cos);
            }
        }
        st.age = 0;
        crate::signal::sine_phase(f, phase, start_time, t0).sin_cos()
    }

    /// Records a change of signal values: filled buffers are stale. `recount` when a signal's
    /// definition may have changed (its steadiness with it).
    fn signals_changed(&mut self, recount: bool) {
        self.sig_gen += 1;
        self.caps_stale = None;
        self.buf_gen += 1;
        if recount {
            self.count_unsteady();
        }
    }

    /// Lists the signals that are not steady.
    fn count_unsteady(&mut self) {
        self.unsteady.clear();
        self.unsteady_other.clear();
        self.sines.clear();
        self.held.clear();
        self.held_events = u64::MAX;
        self.held_in = 0;
        self.force_watch = 0;
        self.watch_list.clear();
        self.signals_turn = false;
        for (k, s) in self.net.signals.iter().enumerate() {
            if !s.is_steady() {
                self.unsteady.push(k as u32);
                if let Signal::Sine { amplitude, offset, start_time, .. } = *s {
                    self.sines.push(k as u32);
                    let st = &mut self.sine_state[k];
                    (st.amplitude, st.offset, st.start_time) = (amplitude, offset, start_time);
                } else if matches!(s, Signal::Step { .. } | Signal::Pulse { .. }) {
                    self.held.push(k as u32);
                } else {
                    self.unsteady_other.push(k as u32);
                }
                self.force_watch |= self.readers.get(k).copied().unwrap_or(0);
                self.signals_turn |= !s.is_linear_between_events();
            }
        }
        // A step or a pulse holds its value between its time events, which end sub-steps, and
        // the modes are selected after each from that value: an element it drives is free
        // exactly while it is not positive, so its engage or release test cannot fire inside
        // a sub-step, and the kernel's list leaves it out.
        for i in bits(self.force_watch) {
            if let Some(k) = self.net.friction[i].law.free_signal()
                && !self.held.contains(&(k as u32))
            {
                self.watch_list.push((i as u32, k as u32));
            }
        }
    }

    /// Creates a simulation at the network's initial state, t = 0.
    pub fn new(net: Network) -> Self {
        Self::with_parameters(net, IntegrationParameters::default())
    }

    /// Creates a simulation with explicit solver parameters.
    pub fn with_parameters(net: Network, params: IntegrationParameters) -> Self {
        Self::starting_at(net, params, 0.0)
    }

    /// Creates a simulation whose clock starts at `t0` s (signals are functions of absolute
    /// time; a rebuilt network continues where the old one was).
    pub fn starting_at(net: Network, params: IntegrationParameters, t0: f64) -> Self {
        let n = net.n_dof;
        let nn = net.nodes.len();
        let nf = net.friction.len();
        let nl = net.laws.len();
        let nk = net.kinematic.len();
        let rmax = net.rows.len() + nf + nk;
        let v = |k: usize| vec![0.0; k];
        let ws = Work {
            sig: [v(net.signals.len()), v(net.signals.len()), v(net.signals.len())],
            f: v(nn),
            fq: v(n),
            xnz: vec![(0, 0.0); n],
            slip_theta: v(nf),
            phi_st: [v(nn), v(nn)],
            w_st: [v(nn), v(nn)],
            q0: v(n),
            q: v(2 * n),
            res: v(2 * n),
            phi1: v(nn),
            w1: v(nn),
            phi_e: v(nn),
            w_e: v(nn),
            acc: v(nn),
            gq: v(2 * n),
            jphi: v(n * n),
            jw: v(n * n),
            tmp_rr: v(rmax * rmax),
            tmp_rr_w: v(rmax * rmax),
            piv_w: vec![0; rmax + 1],
            lam_w: v(rmax),
            lam_start: v(rmax),
            tmp_rn: v(rmax * n),
            tmp_nr: v(rmax * n),
            tmp_rn_w: v(rmax * n),
            tmp_mn: v(n * n),
            piv: vec![0; rmax.max(n) + 1],
            lam: v(rmax),
            qp_w: v(nf * nf),
            qp_b: v(nf),
            qp_x: v(nf),
            qp_lo: v(nf),
            qp_hi: v(nf),
            qp_state: vec![0; nf],
            warm_x: vec![0.0; nf],
            warm_state: vec![0; nf],
            warm_ok: vec![false; nf],
            qp_idx: vec![0; nf],
            qp_fact: v(nf * nf),
            qp_rhs: v(nf),
            qp_piv: vec![0; nf],
            qp_factored: u64::MAX,
            qp_matrix: (u64::MAX, 0, 0),
            qp_eps: 0.0,
            caps: vec![Capacity { free: true, tau0: 0.0, tau_max: 0.0, one_way: false }; nf],
            new_modes: vec![FrictionMode::Free; nf],
            candidate: vec![false; nf],
            sig_end: v(net.signals.len()),
            wp: [v(nn), v(nn), v(nn), v(nn)],
            ud: [v(nn), v(nn), v(nn), v(nn)],
            aug: v(rmax * (n + rmax)),
            lmap: v(rmax * n),
            ls_a: v(nn),
            dep_tau: v(n.max(nf)),
            dependent_input: v(nf),
            qp_extra: v(nn),
            f_st: [v(nn), v(nn)],
            f_end: v(nn),
            lam_st: [v(rmax), v(rmax)],
            lam_end: v(rmax),
            cache: 0,
            newton_inv: v(4 * n * n),
            newton_tmp: v(4 * n * n + 2 * n),
            newton_piv: vec![0; 2 * n],
            phi_save: v(nn),
            w_save: v(nn),
            pred_q0: v(n),
            pred_q: v(2 * n),
            pred_g: v(2 * n),
            pred_ge: v(n),
            pred_g_ok: false,
            stage_g_ok: false,
            force_start: true,
            newton_eta: f64::INFINITY,
            started_from_forces: false,
            pred_h: 0.0,
            pred_slot: usize::MAX,
            pred_epoch: u64::MAX,
            law_power: [v(nl), v(nl)],
            law_diss: [v(nl), v(nl)],
            fric_power: [v(nf), v(nf)],
            fric_tau: [v(nf), v(nf)],
            fric_power_end: v(nf),
            dep_tau_end: v(nf),
            law_tau_end: v(nl),
            law_diss_end: v(nl),
            fric_tau_end: v(nf),
        };
        // The first slot, sized for every coordinate free, takes the base mode (no lock, no
        // engaged kinematic clutch). Every other mode adds rows to it, so its free-coordinate
        // count bounds theirs: the other slots are sized by it (a third of the memory of a
        // vehicle's mode cache).
        let nrhs = net.row_rhs.iter().flatten().count() + nk;
        let slots = vec![ModeSlot::new(n, n, rmax, nrhs, nf)];
        let mut sim = Simulation {
            phi: net.phi_start.clone(),
            w: net.w_start.clone(),
            modes: vec![FrictionMode::Free; nf],
            regimes: vec![LawState::default(); nl],
            kin_engaged: vec![false; nk],
            kin_modes: vec![FrictionMode::Free; nk],
            slots,
            cur: 0,
            clock: 0,
            qp_full: v(nf * nf),
            qp_bmap: v(nf * n),
            qp_tag: None,
            next_time_event: 0.0,
            breaking: 0,
            sliding: 0,
            inputs_changed: false,
            unsteady: CapVec::new(net.signals.len()),
            unsteady_other: CapVec::new(net.signals.len()),
            sines: CapVec::new(net.signals.len()),
            held: CapVec::new(net.signals.len()),
            held_value: vec![(u64::MAX, 0.0); net.signals.len()],
            held_events: u64::MAX,
            held_in: 0,
            time_events: 0,
            sine_state: vec![SineState::default(); net.signals.len()],
            sig_gen: 0,
            buf_gen: 0,
            sig_filled: [u64::MAX; 4],
            caps_key: (u64::MAX, 0),
            caps_all_gen: u64::MAX,
            caps_stale: None,
            zero_slips: None,
            free: 0,
            out_free: 0,
            force_watch: 0,
            watch_list: CapVec::new(nf),
            signals_turn: false,
            lossy: mask_where(&net.friction, |fe| matches!(fe.law, crate::elements::FrictionLaw::Lossy { .. })),
            readers: (0..net.signals.len())
                .map(|k| mask_where(&net.friction, |fe| fe.law.free_signal() == Some(k)))
                .collect(),
            epoch: 0,
            torque_dependent: mask_where(&net.friction, |fe| fe.law.is_torque_dependent()),
            laws_state_free: net.laws.iter().all(Law::is_state_free),
            laws_read_angles: net.laws.iter().any(Law::reads_angles),
            time_only: mask_where(&net.friction, |fe| fe.law.is_time_only()),
            kernel: time_only::TimeOnly::new(n, rmax, nl, nf),
            stage_signals_ready: false,
            started: false,
            row_outputs: Vec::new(),
            mode_sources: Vec::new(),
            out_rel: net.elements.iter().map(|e| e.rel).collect(),
            out_body: net.elements.iter().map(|e| e.body.map(|k| k as u32)).collect(),
            ws,
            events: CapVec::new(4 * (nf + nl) + 8),
            // (A law reads at most one input, a friction element one normal force or load.)
            input_changes: CapVec::new(nl + nf),
            input_changes_ready: (false, false),
            input_steps: CapVec::new(net.signals.len()),
            input_step_pos: vec![u32::MAX; net.signals.len()],
            input_law_start: {
                let mut start = vec![0u32; net.signals.len() + 1];
                for law in &net.laws {
                    if let Some(k) = law.input_signal() {
                        start[k + 1] += 1;
                    }
                }
                for k in 0..net.signals.len() {
                    start[k + 1] += start[k];
                }
                start
            },
            input_laws: {
                let mut by_signal: Vec<(usize, u32)> =
                    net.laws.iter().enumerate().filter_map(|(l, law)| Some((law.input_signal()?, l as u32))).collect();
                by_signal.sort_unstable();
                by_signal.into_iter().map(|(_, l)| l).collect()
            },
            input_jump: false,
            stats: StepStats::default(),
            energy: EnergyLedger::default(),
            out_tau: v(net.elements.len()),
            out_power: v(net.elements.len()),
            t: 0.0,
            params,
            net,
        };
        sim.row_outputs = Self::row_outputs(&sim.net);
        sim.mode_sources = Self::mode_sources(&sim.net);
        sim.count_unsteady();
        sim.compile_into(0, 0);
        let mmax = sim.slots[0].m;
        let more = sim.params.mode_cache_slots.max(3) - 1;
        sim.slots.extend((0..more).map(|_| ModeSlot::new(n, mmax, rmax, nrhs, nf)));
        sim.start(if t0.is_finite() { t0 } else { 0.0 });
        sim
    }

    /// The network being simulated.
    pub fn network(&self) -> &Network {
        &self.net
    }
    /// Current time, s.
    pub fn time(&self) -> f64 {
        self.t
    }
    /// Node angles (free coordinates first, then grounds), rad or m.
    pub fn angles(&self) -> &[f64] {
        &self.phi
    }
    /// Node speeds, rad/s or m/s.
    pub fn speeds(&self) -> &[f64] {
        &self.w
    }
    /// Mode of each friction element (index into `network().friction`).
    pub fn friction_modes(&self) -> &[FrictionMode] {
        &self.modes
    }
    /// Mode changes located during the last step, in time order.
    pub fn events(&self) -> &[ModeEvent] {
        &self.events
    }
    /// Solver counters.
    pub fn stats(&self) -> StepStats {
        self.stats
    }
    /// Turns the energy ledger on or off ([`IntegrationParameters::track_energy`]). Turned on,
    /// it starts over from the present state and books the steps taken from then on.
    pub fn set_track_energy(&mut self, on: bool) {
        if on && !self.params.track_energy {
            self.restart_ledger();
        }
        self.params.track_energy = on;
    }
    /// Energy ledger (requires `track_energy`).
    pub fn energy(&self) -> EnergyLedger {
        // The kinetic energy is a function of the speeds alone: computed when asked.
        EnergyLedger { kinetic: self.kinetic_energy(), ..self.energy }
    }
    /// Names of the run-time inputs ([`crate::Signal::Input`]) of the network.
    pub fn input_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.net.signals.iter().for_each(|s| s.input_names(&mut out));
        out
    }

    /// Sets a run-time input. It takes effect at the start of the next step (a time event:
    /// friction modes are re-resolved there). Non-finite values and unknown names are refused
    /// and leave the simulation unchanged.
    pub fn set_input(&mut self, name: &str, value: f64) -> Result<(), InputError> {
        if !value.is_finite() {
            return Err(InputError::NotFinite { name: name.to_string(), value });
        }
        let (mut hits, now) = (0, self.t);
        for (k, s) in self.net.signals.iter_mut().enumerate() {
            // A whole signal that steps is recorded as by id (one inside another signal is not).
            let before = match s {
                Signal::Input { name: n, .. } if n == name => Some(s.eval(now)),
                _ => None,
            };
            hits += s.set_input(name, value);
            if let Some(v) = before.filter(|&v| v != value) {
                record_input_step(&mut self.input_steps, &mut self.input_step_pos, k, v, value);
            }
        }
        if hits == 0 {
            return Err(InputError::Unknown(name.to_string()));
        }
        self.inputs_changed = true;
        self.signals_changed(true);
        Ok(())
    }

    /// A handle to a run-time input for per-step control loops: `Some` when the name occurs
    /// exactly once and as a whole signal (not inside a sum or product), so that
    /// [`Simulation::set_input_id`] can write it without a name lookup.
    pub fn input_id(&self, name: &str) -> Option<InputId> {
        let mut found = None;
        for (k, s) in self.net.signals.iter().enumerate() {
            let mut names = Vec::new();
            s.input_names(&mut names);
            if names.iter().any(|n| n == name) {
                if found.is_some() || !matches!(s, Signal::Input { .. }) {
                    return None;
                }
                found = Some(InputId(k));
            }
        }
        found
    }

    /// Sets the input behind `id` (see [`Simulation::input_id`]); same rules as
    /// [`Simulation::set_input`]: a non-finite value is refused and changes nothing.
    #[inline]
    pub fn set_input_id(&mut self, id: InputId, value: f64) -> Result<(), InputError> {
        self.set_input_ramp_id(id, value, 0.0)
    }

    /// Sets the input behind `id` to `value` now, changing at `rate` (units per second) from
    /// now on: a first-order hold, so that a prescribed speed carries its acceleration into the
    /// step (the torque that accelerates what it drives). Non-finite values are refused.
    #[inline]
    pub fn set_input_ramp_id(&mut self, id: InputId, value: f64, rate: f64) -> Result<(), InputError> {
        // Controllers write most inputs every step unchanged: that answer stays inline (a NaN
        // never compares equal, so it takes the checked path below).
        if let Signal::Input { value: v, rate: r, since, .. } = &self.net.signals[id.0]
            && *v == value
            && *r == rate
            && (rate == 0.0 || *since == self.t)
        {
            return Ok(());
        }
        self.change_input(id, value, rate)
    }

    /// [`Simulation::set_input_ramp_id`] for a value that may differ from the present one.
    #[inline(never)]
    fn change_input(&mut self, id: InputId, value: f64, rate: f64) -> Result<(), InputError> {
        let now = self.t;
        // (The value now, a ramp's included: what a step starts from.)
        let before = self.net.signals[id.0].eval(now);
        match &mut self.net.signals[id.0] {
            Signal::Input { value: v, name, rate: r, since } => {
                if !value.is_finite() || !rate.is_finite() {
                    let bad = if value.is_finite() { rate } else { value };
                    return Err(InputError::NotFinite { name: name.clone(), value: bad });
                }
                if *v != value || *r != rate || (rate != 0.0 && *since != now) {
                    // A step of the value now is recorded for the stage predictor.
                    if before != value {
                        record_input_step(&mut self.input_steps, &mut self.input_step_pos, id.0, before, value);
                    }
                    let steadiness_changed = (*r == 0.0) != (rate == 0.0);
                    *v = value;
                    *r = rate;
                    *since = now;
                    self.inputs_changed = true;
                    // An input by id is a whole signal that no other signal contains: the
                    // buffers stay valid with its new value patched in (a ramp is unsteady and
                    // evaluated at every fill anyway).
                    self.sig_gen += 1;
                    if steadiness_changed {
                        self.count_unsteady();
                    }
                    self.caps_stale = match self.caps_stale {
                        Some(m) if !steadiness_changed && self.unsteady.is_empty() => Some(m | self.readers[id.0]),
                        _ => None,
                    };
                    if rate == 0.0 {
                        let k = id.0;
                        for (b, buf) in self.ws.signal_buffers().into_iter().enumerate() {
                            if self.sig_filled[b] == self.buf_gen {
                                buf[k] = value;
                            }
                        }
                    }
                }
                Ok(())
            }
            _ => Err(InputError::Unknown(format!("input #{}", id.0))),
        }
    }

    /// Element torque at the last step end (MSL `tau` / `flange_b.tau` convention), N m.
    pub fn element_torque(&self, element: usize) -> f64 {
        self.out_tau[element]
    }
    /// Power the element turns into heat at the last step end, W (dampers, sliding friction,
    /// gear losses, backlash damping, an engaging kinematic clutch); 0 for lossless elements.
    pub fn element_dissipation(&self, element: usize) -> f64 {
        self.out_power[element]
    }

    /// `(phi_rel, w_rel)` of an element with a relative coordinate.
    pub fn element_relative(&self, element: usize) -> Option<(f64, f64)> {
        self.out_rel[element].map(|r| (r.dot(&self.phi), r.dot(&self.w)))
    }
    /// The relative speed of [`Simulation::element_relative`] alone, rad/s (or m/s).
    pub fn element_relative_speed(&self, element: usize) -> Option<f64> {
        self.out_rel[element].map(|r| r.dot(&self.w))
    }
    /// Mode of an element if it has one: friction elements, and elastic clutches (stick = 0,
    /// slide = +-1, no limit torque = 2).
    pub fn element_mode(&self, element: usize) -> Option<FrictionMode> {
        match *self.mode_sources.get(element)? {
            ModeSource::None => None,
            ModeSource::Friction(k) => Some(self.modes[k]),
            ModeSource::Kinematic(j) => Some(self.kin_modes[j]),
            ModeSource::Ideal => Some(FrictionMode::Free),
            ModeSource::Law(k) => self.law_mode(k),
        }
    }

    /// Where each element's mode comes from, in the order [`Simulation::element_mode`] has
    /// always looked: friction element, kinematic clutch, lossless gear, elastic clutch law.
    fn mode_sources(net: &Network) -> Vec<ModeSource> {
        (0..net.elements.len())
            .map(|e| {
                let info = &net.elements[e];
                if let Some(k) = info.friction {
                    ModeSource::Friction(k)
                } else if let Some(j) = net.kinematic.iter().position(|k| k.element == e) {
                    ModeSource::Kinematic(j)
                } else if info.kind == "LossyGear" {
                    ModeSource::Ideal // lossless table: an ideal gear (MSL mode 2)
                } else if let Some(k) = info.law.filter(|&k| matches!(net.laws[k], Law::ElasticClutch { .. })) {
                    ModeSource::Law(k)
                } else {
                    ModeSource::None
                }
            })
            .collect()
    }

    /// The permanent rows that report an element torque (see `row_outputs`).
    fn row_outputs(net: &Network) -> Vec<(usize, usize, f64)> {
        let mut out = Vec::new();
        for (ri, &e) in net.row_element.iter().enumerate() {
            let info = &net.elements[e];
            match info.kind {
                "IdealGear" | "LossyGear" => {
                    let cb = net.rows[ri].entries.iter().find(|x| x.0 == info.nodes[1]).map(|x| x.1).unwrap_or(0.0);
                    out.push((ri, e, -cb));
                }
                "Speed" | "Position" | "LinearSpeed" => out.push((ri, e, 1.0)),
                _ => {}
            }
        }
        out
    }

    fn law_mode(&self, k: usize) -> Option<FrictionMode> {
        let Law::ElasticClutch { limit, .. } = self.net.laws[k] else { return None };
        Some(match self.regimes[k].regime {
            _ if self.net.signals[limit].eval(self.t) <= 0.0 => FrictionMode::Free,
            crate::elements::Regime::SlideForward => FrictionMode::Forward,
            crate::elements::Regime::SlideBackward => FrictionMode::Backward,
            _ => FrictionMode::Stuck,
        })
    }
    /// Angle and speed of an Inertia or Mass element.
    pub fn body_state(&self, element: usize) -> Option<(f64, f64)> {
        self.out_body[element].map(|k| (self.phi[k as usize], self.w[k as usize]))
    }

    /// Derives `W = R A R^T` and `B = R A` for the base slot, `A = N Mr^-1 N^T` being the
    /// acceleration response to generalised forces under the base constraints.
    /// Kept while the base slot stays the same (its key and compile generation), so a network
    /// that sits in one base mode derives it once.
    fn compute_qp(&mut self, base: usize) {
        let n = self.net.n_dof;
        let nf = self.net.friction.len();
        let s = &self.slots[base];
        let tag = (s.key, s.generation);
        if self.qp_tag == Some(tag) {
            return;
        }
        self.qp_tag = Some(tag);
        let m = s.m;
        let col = &mut self.ws.fq;
        // B row i = (R_i N) Mr^-1 N^T; friction rows have at most three entries.
        for i in 0..nf {
            let row = self.net.friction[i].row;
            for j in 0..m {
                col[j] =
                    row.entries.iter().map(|&(k, c)| if c != 0.0 && k < n { c * s.nmat[k * n + j] } else { 0.0 }).sum();
            }
            linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut col[..m]); // symmetric: row vector
            for k in 0..n {
                self.qp_bmap[i * n + k] = (0..m).map(|j| col[j] * s.nmat[k * n + j]).sum();
            }
        }
        for i in 0..nf {
            for j in 0..nf {
                let rj = self.net.friction[j].row;
                self.qp_full[i * nf + j] = rj
                    .entries
                    .iter()
                    .map(|&(k, c)| if c != 0.0 && k < n { c * self.qp_bmap[i * n + k] } else { 0.0 })
                    .sum();
            }
        }
    }

    fn start(&mut self, t0: f64) {
        self.t = t0;
        self.next_time_event = self.compute_next_time_event(t0);
        self.fill_signals(2, t0, false);
        for (k, law) in self.net.laws.iter().enumerate() {
            self.regimes[k] = law.initial_state(&self.phi, &self.w, &self.ws.sig[2]);
        }
        self.select_modes(0, true);
        self.events.clear();
        self.restart_ledger();
        self.update_outputs();
        // Ground entries of the stage and end states never change: written once here, equal
        // to the state's (the time-only kernel commits a sub-step by trading the state's
        // buffers with the end's). Ground nodes do not turn.
        let n = self.net.n_dof;
        self.w[n..].fill(0.0);
        let Work { phi_st, w_st, phi1, w1, .. } = &mut self.ws;
        for (phi, w) in phi_st.iter_mut().zip(w_st.iter_mut()).chain([(phi1, w1)]) {
            w[n..].fill(0.0);
            phi[n..].copy_from_slice(&self.phi[n..]);
        }
        self.started = true;
    }

    fn compute_next_time_event(&self, t: f64) -> f64 {
        self.net.signals.iter().map(|s| s.next_event_after(t)).fold(f64::INFINITY, f64::min)
    }

    /// Starts the energy ledger over from the present state (signals in buffer 2).
    fn restart_ledger(&mut self) {
        let (ke, pe) = self.kinetic_potential(2);
        self.energy = EnergyLedger { kinetic: ke, potential: pe, initial: ke + pe, ..Default::default() };
    }

    fn kinetic_potential(&self, sig: usize) -> (f64, f64) {
        (self.kinetic_energy(), self.potential(sig))
    }

    /// Kinetic energy of the present speeds, J.
    fn kinetic_energy(&self) -> f64 {
        let n = self.net.n_dof;
        (0..n).map(|k| 0.5 * self.net.mass[k] * self.w[k] * self.w[k]).sum()
    }

    /// Potential energy of the laws at the present angles under signal buffer `sig`, J.
    fn potential(&self, sig: usize) -> f64 {
        // Laws that read the signals only store no energy.
        if self.laws_state_free {
            return 0.0;
        }
        self.net.laws.iter().zip(&self.regimes).map(|(law, st)| law.potential(&self.phi, *st, &self.ws.sig[sig])).sum()
    }

    /// Key of a lock pattern: bit i set when friction element i is stuck.
    fn lock_key(modes: &[FrictionMode], kin_engaged: &[bool]) -> u64 {
        let nf = modes.len();
        let k =
            modes.iter().enumerate().fold(0u64, |k, (i, m)| if *m == FrictionMode::Stuck { k | (1 << i) } else { k });
        kin_engaged.iter().enumerate().fold(k, |k, (j, e)| if *e { k | (1 << (nf + j)) } else { k })
    }

    /// Finds or compiles the slot for a lock pattern; returns its index.
    fn slot_for(&mut self, key: u64) -> usize {
        self.clock += 1;
        if let Some(i) = self.slots.iter().position(|s| s.valid && s.key == key) {
            self.slots[i].age = self.clock;
            return i;
        }
        // Slot 0 keeps the lock-free mode (needed by the complementarity data).
        let cur = self.cur;
        let victim = (1..self.slots.len())
            .filter(|&i| i != cur)
            .min_by_key(|&i| if self.slots[i].valid { self.slots[i].age } else { 0 })
            .unwrap_or(1);
        self.compile_into(victim, key);
        self.slots[victim].age = self.clock;
        victim
    }

    /// Compiles the mode with lock pattern `key` into slot `idx` (no allocation: slot buffers
    /// are sized for the largest case).
    fn compile_into(&mut self, idx: usize, key: u64) {
        self.stats.mode_compiles += 1;
        let net = &self.net;
        let n = net.n_dof;
        let slot = &mut self.slots[idx];
        slot.key = key;
        slot.generation = self.stats.mode_compiles;
        slot.valid = true;
        slot.newton_h = f64::NAN;
        slot.omega2 = f64::INFINITY;
        slot.locked.clear();
        slot.kin.clear();
        slot.rhs.clear();
        let nf = net.friction.len();
        for i in 0..nf {
            if key & (1 << i) != 0 {
                slot.locked.push(i);
            }
        }
        for j in 0..net.kinematic.len() {
            if key & (1 << (nf + j)) != 0 {
                slot.kin.push(j);
            }
        }
        let (np, nl) = (net.rows.len(), slot.locked.len());
        let r = np + nl + slot.kin.len();
        slot.r = r;
        for (i, rhs) in net.row_rhs.iter().enumerate() {
            if let Some(sg) = rhs {
                slot.rhs.push((i, Rhs::Source(*sg)));
            }
        }
        for (j, &k) in slot.kin.iter().enumerate() {
            slot.rhs.push((np + nl + j, Rhs::Clutch(net.kinematic[k].rho_signal)));
        }
        // Dense G (r x n) into tmp_rn.
        let g = &mut self.ws.tmp_rn;
        g[..r * n].fill(0.0);
        let row_at = |i: usize| {
            if i < np {
                net.rows[i]
            } else if i < np + nl {
                net.friction[slot.locked[i - np]].row
            } else {
                net.kinematic[slot.kin[i - np - nl]].row
            }
        };
        for i in 0..r {
            let row = row_at(i);
            for &(k, c) in &row.entries {
                if c != 0.0 && k < n {
                    g[i * n + k] += c;
                }
            }
        }
        // RREF of [G | I]: the left block gives the null space, the right block the row
        // operations, from which the particular solutions of prescribed rows follow. Without
        // prescribed rows the right block is left out: RREF works column by column, so the
        // left block and its pivots come out the same either way.
        let cols = if slot.rhs.is_empty() { n } else { n + r };
        let e = &mut self.ws.aug;
        e[..r * cols].fill(0.0);
        for i in 0..r {
            e[i * cols..i * cols + n].copy_from_slice(&g[i * n..(i + 1) * n]);
            if cols > n {
                e[i * cols + n + i] = 1.0;
            }
        }
        let piv = &mut self.ws.piv;
        let total = if r > 0 { linalg::rref(e, r, cols, 1e-12, piv) } else { 0 };
        let rank = piv[..total].iter().filter(|&&c| c < n).count();
        slot.redundant = rank < r;
        let m = n - rank;
        slot.m = m;
        // Slots are sized by the base mode, whose free coordinates bound every other mode's.
        // Rounding in a near-degenerate rank decision could in principle break that bound: the
        // slot then grows (an allocation, once) rather than fail.
        slot.reserve(m);
        // Free columns and null basis (stored with stride n).
        let mut fc = 0;
        for c in 0..n {
            if !piv[..rank].contains(&c) {
                slot.free_cols[fc] = c;
                fc += 1;
            }
        }
        slot.nmat[..n * n].fill(0.0);
        for j in 0..m {
            let c = slot.free_cols[j];
            slot.nmat[c * n + j] = 1.0;
            for i in 0..rank {
                slot.nmat[piv[i] * n + j] = -e[i * cols + c];
            }
        }
        slot.nz.clear();
        for k in 0..n {
            slot.nz_row[k] = slot.nz.len() as u32;
            for j in 0..m {
                let c = slot.nmat[k * n + j];
                if c != 0.0 {
                    slot.nz.push((k as u32, j as u32, c));
                }
            }
        }
        slot.nz_row[n] = slot.nz.len() as u32;
        // The same entries by columns (rows ascending within each).
        slot.nzt.clear();
        for j in 0..m {
            slot.nzt_col[j] = slot.nzt.len() as u32;
            for &(k, col, c) in slot.nz.iter() {
                if col as usize == j {
                    slot.nzt.push((k, c));
                }
            }
        }
        slot.nzt_col[m] = slot.nzt.len() as u32;
        slot.nz_single = slot.nz_row.windows(2).all(|r| r[1] - r[0] <= 1);
        for (k, g) in slot.gather.iter_mut().enumerate() {
            let row = &slot.nz[slot.nz_row[k] as usize..slot.nz_row[k + 1] as usize];
            *g = row.first().map_or((u32::MAX, 0.0), |&(_, j, c)| (j, c));
        }
        for (jj, &(ra, _)) in slot.rhs.iter().enumerate() {
            slot.pmat[jj * n..(jj + 1) * n].fill(0.0);
            for i in 0..rank {
                slot.pmat[jj * n + piv[i]] = e[i * cols + n + ra];
            }
        }
        // Mr = N^T M N.
        for a in 0..m {
            for b in 0..m {
                slot.mr[a * m + b] = (0..n).map(|k| slot.nmat[k * n + a] * net.mass[k] * slot.nmat[k * n + b]).sum();
            }
        }
        slot.mr_lu[..m * m].copy_from_slice(&slot.mr[..m * m]);
        if m > 0 {
            // Positive definite by the build checks (adding locks only removes directions).
            let _ = linalg::lu_factor(&mut slot.mr_lu, m, &mut slot.mr_piv);
        }
        // L = (G G^T + eps I)^-1 G  (minimum-norm constraint torques).
        if r > 0 {
            // G by columns: the products below run over G's rows all at once, each sum as
            // `linalg::dot` forms it (`columns_dot`).
            let gt = &mut self.ws.tmp_nr;
            linalg::transpose(g, r, n, gt, r);
            let gt = &gt[..n * r];
            let ggt = &mut self.ws.tmp_rr;
            let mut tr: f64 = 0.0;
            for a in 0..r {
                // (g_b . g_a: each product is g_a . g_b's, the sum in the same order.)
                columns_dot(gt, r, &g[a * n..(a + 1) * n], &mut ggt[a * r..(a + 1) * r]);
                tr = tr.max(ggt[a * r + a]);
            }
            let eps = if rank < r { 1e-12 * tr.max(1e-300) } else { 0.0 };
            if rank < r {
                // The weighted copy: permanent and kinematic rows (unlimited) weigh as the
                // strongest lock.
                let cap = |a: usize| {
                    if a >= np && a < np + nl {
                        net.friction[slot.locked[a - np]].law.capacity(&self.ws.sig[2]).tau_max.abs()
                    } else {
                        f64::INFINITY
                    }
                };
                let cmax = (np..np + nl).map(cap).fold(0.0f64, f64::max).max(1e-300);
                let gw = &mut self.ws.tmp_rr_w;
                gw[..r * r].copy_from_slice(&ggt[..r * r]);
                for a in 0..r {
                    let c = cap(a).min(cmax);
                    let f = if c > 0.0 { (cmax / c).powi(2).clamp(1.0, 1e6) } else { 1e6 };
                    gw[a * r + a] += eps * f;
                }
                let _ = linalg::lu_factor(gw, r, &mut self.ws.piv_w);
            }
            for a in 0..r {
                ggt[a * r + a] += eps;
            }
            let rp = &mut self.ws.piv;
            let _ = linalg::lu_factor(ggt, r, rp);
            // L = (G G^T)^-1 G, all of G's columns solved at once, then stored by columns.
            let x = &mut self.ws.aug[..r * n];
            x.copy_from_slice(&g[..r * n]);
            linalg::lu_solve_many(ggt, r, rp, x, n);
            linalg::transpose(x, r, n, &mut self.ws.lmap, r);
            // T column k = L (M N Mr^-1 N^T e_k - e_k). The solves for all k at once: Q =
            // Mr^-1 N^T by rows (`Q[j][k]`), and the weighted copy's right-hand sides gathered
            // by rows and solved after the loop (each column as one solve would give it).
            let qm = &mut self.ws.tmp_mn[..m * n];
            for (k, nk) in slot.nmat[..n * n].chunks_exact(n).enumerate() {
                for (j, &x) in nk[..m].iter().enumerate() {
                    qm[j * n + k] = x;
                }
            }
            if m > 0 {
                linalg::lu_solve_many(&slot.mr_lu, m, &slot.mr_piv, qm, n);
            }
            let v = &mut self.ws.acc;
            let wm = &mut self.ws.tmp_rn_w[..r * n];
            let rs = slot.rstride;
            for k in 0..n {
                for (i, vi) in v[..n].iter_mut().enumerate() {
                    // M_i (N_i . q_k), the sum as `linalg::dot` forms it.
                    let mut d = -0.0;
                    for (j, &x) in slot.nmat[i * n..i * n + m].iter().enumerate() {
                        d += x * qm[j * n + k];
                    }
                    *vi = net.mass[i] * d;
                }
                v[k] -= 1.0;
                columns_dot(&self.ws.lmap[..n * r], r, &v[..n], &mut slot.tmap[k * rs..k * rs + r]);
                if rank < r {
                    let col = &mut self.ws.lam_w;
                    columns_dot(gt, r, &v[..n], &mut col[..r]);
                    for (a, &c) in col[..r].iter().enumerate() {
                        wm[a * n + k] = c;
                    }
                }
            }
            if rank < r {
                linalg::lu_solve_many(&self.ws.tmp_rr_w, r, &self.ws.piv_w, wm, n);
                linalg::transpose(wm, r, n, &mut slot.tmap_w, rs);
            }
        }
        // The rows the stage break-away samples read.
        slot.stage_extra.clear();
        slot.stage_rows_all = !slot.rhs.is_empty();
        for &i in slot.locked.iter() {
            let mut need = |row: usize| {
                if !slot.stage_extra.contains(&(row as u32)) && slot.stage_extra.has_room() {
                    slot.stage_extra.push(row as u32);
                }
            };
            match &net.friction[i].law {
                crate::elements::FrictionLaw::Ramp { input, .. } => {
                    for &(row, c) in input {
                        if c != 0.0 {
                            need(row);
                        }
                    }
                }
                crate::elements::FrictionLaw::Lossy { gear_row, .. } => need(*gear_row),
                _ => {}
            }
        }
        // Linearity and reduced Jacobians at the current state.
        let mut linear = true;
        for law in &net.laws {
            if !law.is_linear() {
                linear = false;
            }
        }
        for (i, fe) in net.friction.iter().enumerate() {
            if key & (1 << i) == 0 && !fe.law.is_speed_independent() {
                linear = false;
            }
        }
        slot.linear = linear;
    }

    /// Reduced Jacobians `Dr = N^T df/dw N`, `Kr = N^T df/dphi N` at the given state.
    fn jacobians(&mut self, slot: usize, t_sig: usize) {
        self.stats.jacobian_updates += 1;
        let n = self.net.n_dof;
        let Work { jphi, jw, f, sig, .. } = &mut self.ws;
        jphi[..n * n].fill(0.0);
        jw[..n * n].fill(0.0);
        f.fill(0.0);
        let mut jac = Jacobian { n, dphi: jphi, dw: jw };
        for (k, law) in self.net.laws.iter().enumerate() {
            law.eval(&self.phi, &self.w, &sig[t_sig], self.regimes[k], f, Some(&mut jac));
        }
        // Speed-dependent sliding friction: tau = dir * k(|w_rel|), force -row^T tau.
        for (i, fe) in self.net.friction.iter().enumerate() {
            let dir = self.modes[i].dir();
            if dir != 0.0 && !fe.law.is_speed_independent() {
                let wr = fe.row.dot(&self.w);
                let (_, dk) = fe.law.kinetic(&sig[t_sig], wr.abs(), &self.w);
                // d tau / d w_rel = dir * dk * sign(w_rel) = dk while sliding in direction dir.
                for &(a, ca) in &fe.row.entries {
                    for &(b, cb) in &fe.row.entries {
                        if ca != 0.0 && cb != 0.0 && a < n && b < n {
                            jac.dw[a * n + b] -= ca * cb * dk;
                        }
                    }
                }
            }
        }
        self.slots[slot].jac_uses = 0;
        // N^T J N over the non-zeros of J (a few per element law) and of N's rows (mostly one:
        // a dependent speed follows one free speed). Each entry of `Dr`, `Kr` sums its terms in
        // ascending (i, j), as a dense product skipping zeros would.
        let s = &mut self.slots[slot];
        let m = s.m;
        s.dr[..m * m].fill(0.0);
        s.kr[..m * m].fill(0.0);
        let row = |k: usize| &s.nz[s.nz_row[k] as usize..s.nz_row[k + 1] as usize];
        for i in 0..n {
            let ni = row(i);
            if ni.is_empty() {
                continue;
            }
            for j in 0..n {
                let (dw, dp) = (jw[i * n + j], jphi[i * n + j]);
                if dw == 0.0 && dp == 0.0 {
                    continue;
                }
                for &(_, a, na) in ni {
                    for &(_, b, nb) in row(j) {
                        let ab = a as usize * m + b as usize;
                        s.dr[ab] += na * dw * nb;
                        s.kr[ab] += na * dp * nb;
                    }
                }
            }
        }
        // ||Mr^-1 Kr||_inf bounds every eigenvalue -omega^2 of the undamped motion, column by
        // column of Mr^-1 Kr (once per Jacobian: m solves of size m).
        let Work { fq: col, acc: rows, .. } = &mut self.ws;
        rows[..m].fill(0.0);
        for b in 0..m {
            for a in 0..m {
                col[a] = s.kr[a * m + b];
            }
            if col[..m].iter().any(|&v| v != 0.0) {
                linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut col[..m]);
                for a in 0..m {
                    rows[a] += col[a].abs();
                }
            }
        }
        s.omega2 = rows[..m].iter().fold(0.0, |x: f64, &r| x.max(r));
    }

    /// Evaluates the Jacobian of a nonlinear mode now and factors its Newton matrix for `h`
    /// into the slot.
    fn fresh_jacobian(&mut self, slot: usize, h: f64) {
        self.jacobians(slot, 0);
        let s = &mut self.slots[slot];
        s.jac_epoch = self.epoch;
        s.jac_stale = false;
        self.factor_newton(slot, h, false);
    }

    /// Factors the Newton matrix `I (x) Mr - h A (x) Dr - h^2 A^2 (x) Kr` for step `h`, into the
    /// slot (kept for the next steps of that size) or into the scratch buffer (partial steps).
    fn factor_newton(&mut self, slot: usize, h: f64, scratch: bool) {
        let s = &mut self.slots[slot];
        let m = s.m;
        let mm = 2 * m;
        let Work { newton_inv, newton_piv, newton_tmp, .. } = &mut self.ws;
        let (lu, piv) = if scratch {
            (newton_inv, newton_piv)
        } else {
            s.newton_h = h;
            (&mut s.newton_inv, &mut s.newton_piv)
        };
        for bi in 0..2 {
            for bk in 0..2 {
                for a in 0..m {
                    for b in 0..m {
                        let mr = if bi == bk { s.mr[a * m + b] } else { 0.0 };
                        lu[(bi * m + a) * mm + bk * m + b] =
                            mr - h * A[bi][bk] * s.dr[a * m + b] - h * h * A2[bi][bk] * s.kr[a * m + b];
                    }
                }
            }
        }
        // A singular matrix leaves non-finite factors: the step then reports a non-finite state.
        let _ = linalg::lu_factor(lu, mm, piv);
        // The explicit inverse: every Newton correction of the factors' lifetime (many steps in
        // a linear mode or on a kept Jacobian) is then one matrix-vector product. Stored by
        // columns, which the product runs over ([`Correction`]).
        // All unit columns at once (each as `lu_solve` would give it), into rows of `x`.
        let x = &mut newton_tmp[..mm * mm];
        x.fill(0.0);
        for c in 0..mm {
            x[c * mm + c] = 1.0;
        }
        linalg::lu_solve_many(lu, mm, piv, x, mm);
        linalg::transpose(x, mm, mm, lu, mm);
    }

    /// Generalised forces at (phi, w) with signals `sig`, modes and regimes as they are.
    /// Fills `f` (all nodes) and, when `powers` is set, per-law power and dissipation.
    fn forces(
        net: &Network,
        modes: &[FrictionMode],
        sliding: u64,
        regimes: &[LawState],
        phi: &[f64],
        w: &[f64],
        sig: &[f64],
        f: &mut [f64],
        record: Record,
    ) {
        // One body per kind of record, its writes fixed at compile time.
        match record {
            Record::Nothing => Self::forces_in::<NO_RECORD>(
                net,
                modes,
                sliding,
                regimes,
                phi,
                w,
                sig,
                f,
                [&mut [], &mut [], &mut [], &mut []],
            ),
            Record::Powers(p, d, fp, ft) => {
                Self::forces_in::<POWERS>(net, modes, sliding, regimes, phi, w, sig, f, [p, d, fp, ft])
            }
            Record::Torques(tau, d, ft, fp) => {
                Self::forces_in::<TORQUES>(net, modes, sliding, regimes, phi, w, sig, f, [tau, d, ft, fp])
            }
        }
    }

    /// [`Simulation::forces`] for one kind of record: `rec` holds its four slices in the order
    /// of its variant ([`Record`]), empty for `NO_RECORD`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn forces_in<const REC: u8>(
        net: &Network,
        modes: &[FrictionMode],
        sliding: u64,
        regimes: &[LawState],
        phi: &[f64],
        w: &[f64],
        sig: &[f64],
        f: &mut [f64],
        rec: [&mut [f64]; 4],
    ) {
        let [r0, r1, r2, r3] = rec;
        f.fill(0.0);
        for (k, law) in net.laws.iter().enumerate() {
            let o = law.force(phi, w, sig, regimes[k], f);
            match REC {
                // Powers: law power and dissipation.
                POWERS => {
                    r0[k] = o.power;
                    r1[k] = o.dissipation;
                }
                // Torques: law torque and dissipation.
                TORQUES => {
                    r0[k] = o.tau;
                    r1[k] = o.dissipation;
                }
                _ => {}
            }
        }
        // Stuck and free elements carry no applied torque (a stuck one's is a constraint torque):
        // only the sliding elements' entries of the friction records are written, and only
        // theirs are ever read (the ledger and the outputs visit the sliding elements).
        for i in bits(sliding) {
            let fe = &net.friction[i];
            let wr = fe.row.dot(w);
            let tk = fe.law.kinetic_torque(sig, wr.abs(), w);
            let tau = modes[i].dir() * tk;
            fe.row.add_scaled(f, -tau);
            let power = tau * wr; // dissipated
            match REC {
                // Powers: friction dissipation and torque.
                POWERS => {
                    r2[i] = power;
                    r3[i] = tau;
                }
                // Torques: friction torque and dissipation.
                TORQUES => {
                    r2[i] = tau;
                    r3[i] = power;
                }
                _ => {}
            }
        }
    }

    /// Rolling LossyGears: adds the loss torque `-tauLoss L^T` (`L = w_a - w_s`), where
    /// `tauLoss = k tau_a + c` in the quadrant in force and `tau_a` is the torque the gear
    /// transmits, itself depending on `tauLoss` through the constraint torque of the gear row:
    /// the affine relation is solved exactly, and the quadrant is re-chosen if the result lies
    /// in the other one (the law is continuous there). Several rolling lossy gears are resolved
    /// one after the other (Gauss-Seidel sweeps).
    ///
    /// Sliding limited-slip packs are resolved the same way: their torque
    /// `dir (preload + ramp |T_in|) / 2` depends on the input torque `T_in = sum c lambda_row`,
    /// itself affine in the pack torque; the sign case of `T_in` is chosen consistently.
    ///
    /// `fp` gets the friction power, `tau_out` the friction torque of each corrected element.
    /// `mask`: the torque-dependent elements that slide under `modes` (the others are skipped).
    #[allow(clippy::too_many_arguments)]
    fn torque_dependent_correct(
        net: &Network,
        s: &ModeSlot,
        modes: &[FrictionMode],
        mask: u64,
        w: &[f64],
        f: &mut [f64],
        a: &mut [f64],
        tau_out: &mut [f64],
        mut fp: Option<&mut [f64]>,
    ) {
        let n = net.n_dof;
        // lambda of permanent row `g` for generalised force x: T_g . x.
        let lam_of = |x: &dyn Fn(usize) -> f64, g: usize, _a: &mut [f64]| -> f64 {
            (0..n).map(|k| s.tmap[k * s.rstride + g] * x(k)).sum()
        };
        for i in bits(mask) {
            let fe = &net.friction[i];
            let dir = modes[i].dir();
            if let crate::elements::FrictionLaw::Ramp { input, carrier, .. } = &fe.law {
                // T_in(tau) = A - tau B for the pack force -tau row^T added to f.
                let lt = |k: usize| if k < n { row_coef(&fe.row, k) } else { 0.0 };
                let fl = |k: usize| f[k];
                let (mut ta, mut tb) = (0.0, 0.0);
                for &(r, c) in input {
                    if c != 0.0 {
                        ta += c * lam_of(&fl, r, a);
                        tb += c * lam_of(&lt, r, a);
                    }
                }
                let wc = w[*carrier];
                let solve = |sgn: f64| {
                    let (p, ramp) = match fe.law {
                        crate::elements::FrictionLaw::Ramp { preload, power, coast, .. } => {
                            (preload, if sgn * wc >= 0.0 { power } else { coast })
                        }
                        _ => (0.0, 0.0),
                    };
                    // tau = dir (p + ramp sgn (A - tau B)) / 2
                    let tau = dir * (p + ramp * sgn * ta) / 2.0 / (1.0 + dir * ramp * sgn * tb / 2.0);
                    (tau, sgn * (ta - tau * tb) >= 0.0)
                };
                let s0 = if ta >= 0.0 { 1.0 } else { -1.0 };
                let (t0, ok0) = solve(s0);
                let tau = if ok0 {
                    t0
                } else {
                    let (t1, ok1) = solve(-s0);
                    if ok1 { t1 } else { dir * fe.law.ramp_limit(0.0, wc).unwrap_or(0.0) }
                };
                fe.row.add_scaled(f, -tau);
                tau_out[i] = tau;
                if let Some(p) = fp.as_mut() {
                    p[i] = tau * fe.row.dot(w);
                }
                continue;
            }
            let crate::elements::FrictionLaw::Lossy { table, gear_row } = &fe.law else { continue };
            let wr = fe.row.dot(w);
            let quads = table.at(wr.abs());
            let fl = |k: usize| f[k];
            let lam_f = lam_of(&fl, *gear_row, a);
            let lt = |k: usize| if k < n { row_coef(&fe.row, k) } else { 0.0 };
            let lam_l = lam_of(&lt, *gear_row, a);
            let solve = |qd: u8| {
                let (k, c) = quads.coefficients(qd);
                let tau = (c - k * lam_f) / (1.0 - k * (1.0 + lam_l));
                (tau, tau * (1.0 + lam_l) - lam_f)
            };
            let q0 = if dir > 0.0 { 1 } else { 4 };
            let (mut tau, tau_a) = solve(q0);
            let qd = quads.quadrant(dir, tau_a);
            if qd != q0 {
                tau = solve(qd).0;
            }
            fe.row.add_scaled(f, -tau);
            tau_out[i] = tau;
            if let Some(p) = fp.as_mut() {
                p[i] = tau * wr;
            }
        }
    }

    /// Advances the simulation by `dt` seconds.
    ///
    /// Non-finite or non-positive `dt` is rejected with an error and changes nothing.
    pub fn step(&mut self, dt: f64) -> Result<(), StepError> {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(StepError::BadStep(dt));
        }
        self.events.clear();
        self.stats.steps += 1;
        let t_end = self.t + dt;
        // A step that is one event-free sub-step of the time-only kernel (a mode whose forces
        // depend on time alone): the kernel never commits a non-finite state, so nothing needs
        // saving. Any other step, or one the kernel declines, takes the general path.
        if let Some(clean_end) = self.whole_step_in_kernel(t_end, dt) {
            self.finish_step(clean_end);
            return Ok(());
        }
        self.general_step(t_end, dt)
    }

    /// A step from `t` to `t_end` (of length `dt`) that the time-only kernel does not take in
    /// one sub-step: sub-steps between time and state events, each integrated, screened for
    /// events and committed, modes selected at each event.
    #[inline(never)]
    fn general_step(&mut self, t_end: f64, dt: f64) -> Result<(), StepError> {
        // The state at the step start, restored if the step produces a non-finite value.
        let t_start = self.t;
        self.ws.phi_save.copy_from_slice(&self.phi);
        self.ws.w_save.copy_from_slice(&self.w);
        if self.inputs_changed {
            self.after_input_change();
        }
        let mut substeps = 0;
        // True when the step ends on an event-free sub-step: its end caches describe the state.
        let mut clean_end = false;
        while self.t < t_end {
            substeps += 1;
            clean_end = false;
            let te = self.next_time_event;
            let (target, time_event) = if te <= t_end + 1e-9 * dt { (te, true) } else { (t_end, false) };
            let h = target - self.t;
            if h <= 1e-15 * self.t.abs().max(1.0) {
                self.t = target;
                if time_event {
                    self.after_time_event();
                }
                continue;
            }
            if substeps > self.params.max_substeps {
                self.stats.zeno_guards += 1;
                self.integrate(h, false);
                self.commit(h);
                if time_event {
                    self.after_time_event();
                }
                continue;
            }
            self.stats.substeps += 1;
            let moving = self.moving_slips();
            self.integrate(h, h >= 0.999 * dt);
            match self.detect_event(h) {
                None => {
                    self.commit(h);
                    clean_end = self.after_clean_substep(moving, time_event);
                }
                Some((theta, forced, breaking)) => {
                    self.stats.state_events += 1;
                    let he = h * theta;
                    if he > 0.0 {
                        self.integrate(he, false);
                        self.commit(he);
                    }
                    self.breaking = breaking;
                    self.select_modes(forced, false);
                    self.breaking = 0;
                }
            }
        }
        self.t = t_end.max(self.t);
        for &(k, _, _) in self.input_steps.iter() {
            self.input_step_pos[k as usize] = u32::MAX;
        }
        self.input_steps.clear();
        self.input_changes_ready = (false, false);
        self.input_jump = false;
        let n = self.net.n_dof;
        if !(all_finite(&self.phi[..n]) && all_finite(&self.w[..n])) {
            // Never propagate NaN or infinity: go back to the step start and report.
            self.phi.copy_from_slice(&self.ws.phi_save);
            self.w.copy_from_slice(&self.ws.w_save);
            self.t = t_start;
            self.select_modes(0, false);
            self.update_outputs();
            return Err(StepError::NonFinite(t_start));
        }
        self.finish_step(clean_end);
        Ok(())
    }

    /// The whole step from `t` to `t_end` as one sub-step of the time-only kernel, when no
    /// input changed, no time event falls in it and the kernel takes it: then committed, and
    /// whether it ended clean ([`Simulation::after_clean_substep`]); `None` with nothing
    /// changed otherwise.
    fn whole_step_in_kernel(&mut self, t_end: f64, dt: f64) -> Option<bool> {
        let h = t_end - self.t;
        if self.inputs_changed
            || self.next_time_event <= t_end + 1e-9 * dt
            || h <= 1e-15 * self.t.abs().max(1.0)
            || self.params.max_substeps == 0
            || !self.time_only_network()
        {
            return None;
        }
        let zero_slips = self.zero_slips;
        let moving = self.moving_slips();
        if !self.time_only_substep(h) {
            // The general path takes the step from the same state.
            self.zero_slips = zero_slips;
            return None;
        }
        self.stats.substeps += 1;
        let clean = self.after_clean_substep(moving, false);
        self.t = t_end.max(self.t);
        Some(clean)
    }

    /// Sliding elements whose slip is non-zero now (a slip held at zero by another lock, for
    /// example a bearing friction beside a stuck lossy gear, is not "reaching" zero), as a
    /// mask; the zero slips known from the last sub-step's end are used up.
    fn moving_slips(&mut self) -> u64 {
        !self.zero_slips.take().unwrap_or_else(|| self.slips_at_zero())
    }

    /// After an event-free sub-step is committed: locks the elements whose slip reached zero
    /// exactly at its end (of those `moving` at its start) and handles a time event ending it.
    /// True when the state is the sub-step's clean end (no mode selection since).
    fn after_clean_substep(&mut self, moving: u64, time_event: bool) -> bool {
        // (The time-only kernel found them as it committed; the general commit leaves None.)
        let zero = self.zero_slips.unwrap_or_else(|| self.slips_at_zero());
        // The next sub-step starts from this state: unless a mode selection intervenes, its
        // zero slips are these.
        self.zero_slips = Some(zero);
        let at_zero = zero & moving;
        if at_zero != 0 {
            self.select_modes(at_zero, false);
        }
        if time_event {
            self.after_time_event();
            return false;
        }
        at_zero == 0
    }

    /// The outputs at the end of a step: from the last sub-step's end caches when it ended
    /// clean, evaluated afresh otherwise.
    #[inline(always)]
    fn finish_step(&mut self, clean_end: bool) {
        if clean_end {
            // (The kernel's commit leaves them valid; the call is skipped then.)
            if self.ws.cache & 4 == 0 {
                self.end_torques();
            }
            let Work { sig_end, sig, .. } = &mut self.ws;
            sig[2].copy_from_slice(sig_end);
            self.sig_filled[2] = self.sig_filled[3];
            self.update_torques(true);
        } else {
            self.update_outputs();
        }
    }

    /// Sliding friction elements whose slip is zero (to rounding) now.
    fn slips_at_zero(&self) -> u64 {
        if self.sliding == 0 {
            return 0;
        }
        let tol = zero_slip_tolerance(speed_scale(&self.w[..self.net.n_dof]));
        let mut mask = 0;
        for i in bits(self.sliding) {
            if self.net.friction[i].row.dot(&self.w).abs() <= tol {
                mask |= 1 << i;
            }
        }
        mask
    }

    fn after_time_event(&mut self) {
        self.time_events += 1;
        self.next_time_event = self.compute_next_time_event(self.t);
        // Signals may have jumped: re-evaluate backlash regimes and friction modes.
        self.select_modes(0, false);
    }

    /// One Gauss step of size `h` from the current state in the current mode, into
    /// `ws.phi1/w1` (end) and `ws.phi_st/w_st` (stages). Does not change the state.
    fn integrate(&mut self, h: f64, full_step: bool) {
        let n = self.net.n_dof;
        let slot = self.cur;
        let t0 = self.t;
        let jump = std::mem::take(&mut self.input_jump);
        if !std::mem::take(&mut self.stage_signals_ready) {
            self.fill_stage_signals(t0, h);
        }
        // The end forces of the last sub-step, if its end was evaluated: the state now.
        let end_forces = self.ws.cache & 4 != 0;
        self.ws.cache = 0;
        self.ws.stage_g_ok = false;
        self.ws.started_from_forces = false;
        let prescribed = !self.slots[slot].rhs.is_empty();
        // A mode whose forces depend on time alone: the quadrature of the time-only kernel is
        // the one linear solve, without the factors a new sub-step length would need.
        if !prescribed && self.time_only_network() && self.time_only_integrate(h) {
            return;
        }
        if prescribed {
            self.prescribed(t0 + C[0] * h, 0);
            self.prescribed(t0 + C[1] * h, 1);
            self.prescribed(t0 + h, 2);
        }
        let linear = self.slots[slot].linear;
        let cached_h = self.slots[slot].newton_h;
        // Rounding-level differences in h (k dt - t) reuse the factors: the one Newton solve of
        // a linear mode is then off by ~1e-12 of its update, far below the truncation error.
        // Nonlinear modes: the Jacobian (at a step start, signals at the first stage) is kept
        // over the steps of one epoch while Newton contracts fast on it (simplified Newton);
        // a slow iteration marks it stale and the next sub-step evaluates it afresh.
        let reusable =
            !linear && !cached_h.is_nan() && self.slots[slot].jac_epoch == self.epoch && !self.slots[slot].jac_stale;
        let mut reused = reusable;
        let scratch = if !linear {
            if reusable && (h - cached_h).abs() <= 1e-12 * h {
                false
            } else if reusable && !full_step {
                self.factor_newton(slot, h, true);
                true
            } else {
                reused = false;
                self.fresh_jacobian(slot, h);
                false
            }
        } else if cached_h.is_nan() {
            self.jacobians(slot, 0);
            self.factor_newton(slot, h, false);
            false
        } else if (h - cached_h).abs() <= 1e-12 * h {
            false
        } else if full_step {
            self.factor_newton(slot, h, false);
            false
        } else {
            self.factor_newton(slot, h, true);
            true
        };
        let m = self.slots[slot].m;
        // Nonlinear modes continuing the last sub-step in the same mode and epoch: the stage
        // guesses come from its collocation polynomial, extrapolated (error O(h^3) instead of
        // the O(h) of a constant guess), so that Newton converges in one correction. Other
        // sub-steps start from the stage guesses Q_i = q0.
        let predicted = !linear && self.ws.pred_slot == slot && self.ws.pred_epoch == self.epoch;
        {
            // q0 = w on the free columns.
            let Work { q0, q, .. } = &mut self.ws;
            let (q0, q) = (&mut q0[..m], &mut q[..2 * m]);
            for (q0, &c) in q0.iter_mut().zip(&self.slots[slot].free_cols[..m]) {
                *q0 = self.w[c];
            }
            if !predicted {
                q[..m].copy_from_slice(q0);
                q[m..].copy_from_slice(q0);
            }
        }
        if predicted {
            let r = h / self.ws.pred_h;
            let Work { q, pred_q0, pred_q, .. } = &mut self.ws;
            let (p0, p1, p2) = (&pred_q0[..m], &pred_q[..m], &pred_q[m..2 * m]);
            for (i, qi) in q[..2 * m].chunks_exact_mut(m.max(1)).enumerate() {
                let [l0, l1, l2] = lagrange(1.0 + C[i] * r);
                for (((q, a), b), c) in qi.iter_mut().zip(p0).zip(p1).zip(p2) {
                    *q = l0 * a + l1 * b + l2 * c;
                }
            }
            // Inputs that stepped at the step start change the accelerations from there on,
            // which no extrapolation of the last sub-step sees: the guess follows them, on its
            // own or with the extrapolated forces (see `NewtonStart`).
            // (A sliding lossy gear or limited-slip pack switches its law with the sign of a
            // constraint torque: its force is no smooth function of time to extrapolate. Nor
            // are forces extrapolated over more than four times the last sub-step's length: the
            // step after an event continues from a short rest of a step, a frame-time hitch
            // from short steps, and the quadratic would amplify the forces' errors by up to
            // the square of the ratio; a 50 ms hitch after 1 ms steps diverged.)
            let smooth = !prescribed && self.torque_dependent & self.sliding == 0 && r <= 4.0;
            if self.params.newton_start == NewtonStart::Forces
                && smooth
                && end_forces
                && self.ws.pred_g_ok
                && self.ws.force_start
            {
                self.predict_from_forces(slot, h, r, scratch, jump);
                self.ws.started_from_forces = true;
            } else if jump {
                self.follow_input_steps(slot, h, scratch);
            }
        }
        // A fresh Jacobian costs about two and a half Newton iterations (its evaluation and the
        // factors): worth it when the old one has served a while and now needs a third
        // iteration. One aged within a few sub-steps (clutch pressures ramping through a
        // shift) would age as fast again: it is kept until a fourth iteration is needed.
        if reused {
            self.slots[slot].jac_uses += 1;
        }
        let slow = if self.slots[slot].jac_uses > JAC_PAYBACK { 3 } else { 4 };
        // Without the energy ledger an iteration may end on its contraction estimate (see
        // `IntegrationParameters::track_energy`); not where a law switches with a constraint
        // torque's sign (sliding lossy gears, limited-slip packs), nor from an estimate made
        // in another mode or epoch.
        let by_estimate = !linear && !self.params.track_energy && self.torque_dependent & self.sliding == 0;
        self.ws.newton_eta = if by_estimate && predicted { self.ws.newton_eta * ETA_AGEING } else { f64::INFINITY };
        let mut last_dq = f64::INFINITY;
        let mut iter = 0;
        loop {
            iter += 1;
            self.stats.newton_iterations += 1;
            if iter == 1 && !prescribed && !predicted {
                // The starting guess Q_i = q0 is the current motion: W_i = w, Phi_i = phi + h c_i w.
                for i in 0..2 {
                    let Work { w_st, phi_st, .. } = &mut self.ws;
                    w_st[i][..n].copy_from_slice(&self.w[..n]);
                    for k in 0..n {
                        phi_st[i][k] = self.phi[k] + h * C[i] * self.w[k];
                    }
                }
            } else if self.laws_read_angles {
                self.stage_states(h);
            } else {
                // (No force reads the stage angles: they are formed once, after the iteration.)
                self.stage_speeds();
            }
            // Residual R_i = Mr (Q_i - q0) - h sum_j a_ij N^T f_j. The forces go straight into
            // the stage-force cache with their powers: after the last iteration they are the
            // stage forces (at stages within the Newton tolerance of the converged ones).
            for j in 0..2 {
                self.stage_force(j);
                // g_j = N^T f_j (prescribed rows: the reduced force loses N^T M P rho').
                let s = &self.slots[slot];
                let Work { gq, f_st, ud, acc, .. } = &mut self.ws;
                let gq = &mut gq[j * m..(j + 1) * m];
                let x = if prescribed {
                    for k in 0..n {
                        acc[k] = f_st[j][k] - self.net.mass[k] * ud[j][k];
                    }
                    &acc[..n]
                } else {
                    &f_st[j][..n]
                };
                s.nt_times(x, gq);
            }
            // From the guess Q_i = q0, Mr (Q_i - q0) is +0.0 (a row's diagonal term is +0.0,
            // so the sum is too) and subtracting it changes nothing: skipped.
            let residual = if iter == 1 && !predicted { Residual::Forces } else { Residual::Full };
            let s = &self.slots[slot];
            let Work { newton_inv, res, q, q0, gq, .. } = &mut self.ws;
            let inv = if scratch { &newton_inv[..] } else { &s.newton_inv[..] };
            let (norm_dq, norm_q) = Correction { residual, h, mr: &s.mr, gq, q0, inv }.apply(m, q, res);
            if iter == 1 {
                // The force start costs a matrix-vector product: worth it while the simpler
                // start would miss (a shift's transients), not in a steady cruise.
                let keep = if self.ws.started_from_forces { 0.01 } else { 1.0 };
                self.ws.force_start = norm_dq > keep * self.params.newton_tolerance * (1.0 + norm_q);
            }
            let tol = self.params.newton_tolerance * (1.0 + norm_q);
            if by_estimate && iter > 1 {
                let theta = norm_dq / last_dq;
                self.ws.newton_eta = if theta < 1.0 { theta / (1.0 - theta) } else { f64::INFINITY };
            }
            last_dq = norm_dq;
            if by_estimate
                && norm_dq > tol
                && norm_dq <= ETA_RANGE * tol
                && self.ws.newton_eta * norm_dq <= ETA_SAFETY * tol
            {
                // The corrected iterate is within the tolerance by the estimate (RADAU5's
                // criterion); the forces just evaluated, at the iterate before it, stand in for
                // the stage forces (the stage torques' inputs, within the correction's effect).
                self.ws.cache |= 1;
                break;
            }
            if linear || norm_dq <= tol {
                // A converged correction is within the tolerance: the forces just evaluated are
                // the stage forces (also when the first correction of a predicted guess is).
                // One linear solve from the guess is exact but its forces are those of the guess.
                if !linear && (iter > 1 || predicted) {
                    self.ws.cache |= 1;
                }
                // Forces that depend on time alone are the same at the guess and at the stages
                // (their powers are not: the energy ledger re-evaluates them).
                if linear && self.forces_time_only() && !self.params.track_energy {
                    self.ws.cache |= 1;
                }
                break;
            }
            if iter >= self.params.max_newton_iterations {
                self.stats.newton_failures += 1;
                break;
            }
            if reused && iter >= slow {
                // Slow on the old Jacobian: continue from this iterate on a fresh one.
                reused = false;
                last_dq = f64::INFINITY;
                if scratch {
                    self.jacobians(slot, 0);
                    self.slots[slot].jac_epoch = self.epoch;
                    self.slots[slot].jac_stale = false;
                    self.slots[slot].newton_h = f64::NAN;
                    self.factor_newton(slot, h, true);
                } else {
                    self.fresh_jacobian(slot, h);
                }
            }
        }
        if reused && iter >= slow {
            self.slots[slot].jac_stale = true;
        }
        // `gq` holds the reduced forces of the last iterate: the next sub-step extrapolates them.
        self.ws.stage_g_ok = true;
        self.stage_states(h);
        // End values: q1 = q0 + sum_j D_j (Q_j - q0); phi1 = phi0 + h sum b_i W_i.
        let s = &self.slots[slot];
        // q1 = q0 + sum_j D_j (Q_j - q0), kept in res (free now).
        {
            let Work { q0, q, res, .. } = &mut self.ws;
            let (q1, q2) = q[..2 * m].split_at(m);
            for (((r, &q0), q1), q2) in res[..m].iter_mut().zip(&q0[..m]).zip(q1).zip(q2) {
                *r = q0 + D[0] * (q1 - q0) + D[1] * (q2 - q0);
            }
        }
        let Work { res, w1, wp, phi1, w_st, .. } = &mut self.ws;
        s.n_times(&res[..m], &mut w1[..n]);
        if prescribed {
            for (w, p) in w1[..n].iter_mut().zip(&wp[2][..n]) {
                *w += p;
            }
        }
        for (((p1, p), w0), w1) in phi1[..n].iter_mut().zip(&self.phi[..n]).zip(&w_st[0][..n]).zip(&w_st[1][..n]) {
            *p1 = p + h * (B[0] * w0 + B[1] * w1);
        }
    }

    /// Moves the predicted stages `ws.q` of a sub-step of size `h` by the linear response to
    /// the input steps recorded since the last step: `dQ = J^-1 h (A (x) N^T) dF`, where `dF_j`
    /// is the change of the stage forces ([`Simulation::input_step_forces`]).
    ///
    /// A controller writes its outputs as values held over each step, so they step at every
    /// step start through a shift (clutch pressures, throttle cuts) and with every pedal move;
    /// the extrapolated guess then misses the stages by what the steps do over a step (about
    /// 1e-2 rad/s through a 1-2 upshift of the 8HP sedan) and Newton needs a third iteration
    /// to reach its tolerance. The guess only changes where Newton starts: the converged stages
    /// are the same to the tolerance.
    fn follow_input_steps(&mut self, slot: usize, h: f64, scratch: bool) {
        if self.input_step_forces(slot) {
            self.newton_response(slot, h, scratch, Residual::Forces);
        }
    }

    /// The linearly implicit predictor ([`NewtonStart::Forces`]): the reduced forces of the
    /// last sub-step at its stages (`ws.pred_g`) and its end (`N^T f_end`) are extrapolated by
    /// their quadratic in time to the stages of this sub-step (`r = h / h_last`), the input
    /// steps' changes added, and the extrapolated stages `ws.q` take one Newton correction
    /// with these forces: `Q += J^-1 (h (A (x) I) g - (I (x) Mr) (Q - q0))`.
    ///
    /// With the forces of the solution the correction would land on it; with forces that are
    /// off by `e_g` (the extrapolation error, `O(h^3)`), it lands `J^-1 h A e_g` away: `O(h^4)`
    /// where the motion is smooth, and about `e_g / lambda` in a stiff mode of rate `lambda`,
    /// where the extrapolated speeds miss by the mode's whole curvature.
    fn predict_from_forces(&mut self, slot: usize, h: f64, r: f64, scratch: bool, jump: bool) {
        let s = &self.slots[slot];
        let m = s.m;
        {
            let Work { f_end, pred_ge, .. } = &mut self.ws;
            s.nt_times(f_end, pred_ge);
        }
        if !(jump && self.input_step_forces(slot)) {
            self.ws.gq[..2 * m].fill(0.0);
        }
        let Work { gq, pred_g, pred_ge, .. } = &mut self.ws;
        let (g0, g1, ge) = (&pred_g[..m], &pred_g[m..2 * m], &pred_ge[..m]);
        for (i, gi) in gq[..2 * m].chunks_exact_mut(m.max(1)).enumerate() {
            // The quadratic through the stages (c_1, c_2) and the end (1) of the last sub-step,
            // at this sub-step's stage i, in units of the last sub-step's length.
            let [l0, l1, l2] = lagrange3([C[0], C[1], 1.0], 1.0 + C[i] * r);
            for (((g, a), b), c) in gi.iter_mut().zip(g0).zip(g1).zip(ge) {
                *g += l0 * a + l1 * b + l2 * c;
            }
        }
        self.newton_response(slot, h, scratch, Residual::Full);
    }

    /// Moves the stages `ws.q` by the Newton correction for the reduced stage forces in
    /// `ws.gq` ([`Correction`]) through the inverse Newton matrix of the slot (or the
    /// scratch one).
    fn newton_response(&mut self, slot: usize, h: f64, scratch: bool, residual: Residual) {
        let s = &self.slots[slot];
        let Work { gq, res, q, q0, newton_inv, .. } = &mut self.ws;
        let inv = if scratch { &newton_inv[..] } else { &s.newton_inv[..] };
        Correction { residual, h, mr: &s.mr, gq, q0, inv }.apply(s.m, q, res);
    }

    /// The change of the reduced stage forces at the step start from the input steps recorded
    /// since the last step, into `ws.gq` (stage `j` at `j m..`): a sliding friction element
    /// whose torque is proportional to a stepped signal
    /// ([`FrictionLaw::torque_signal`](crate::elements::FrictionLaw::torque_signal): clutch and
    /// brake normal forces, tyre loads) changes its last stage torques by the ratio of the
    /// values, a law its force at the step start ([`Law::signal_step`]: sources, engine
    /// throttles). A ramping input's change over the step is in the stage signals already;
    /// only a jump of its value is followed. False, with `gq` left as it was or zero, when no
    /// step changes a force.
    fn input_step_forces(&mut self, slot: usize) -> bool {
        // (Most steps step only signals nothing here follows, the load of a rolling tyre whose
        // force is a constraint torque: their record is empty.)
        self.input_changes();
        if self.input_changes.is_empty() {
            return false;
        }
        let n = self.net.n_dof;
        let s = &self.slots[slot];
        let m = s.m;
        let Work { fric_tau, gq, .. } = &mut self.ws;
        // g_j = N^T dF_j, formed node by node (ground nodes carry no coordinate).
        let (g0, g1) = gq[..2 * m].split_at_mut(m);
        g0.fill(0.0);
        g1.fill(0.0);
        // Both stages at once: each sum still adds its terms in the order of the changes.
        let mut add = |node: usize, v0: f64, v1: f64| {
            if node < n {
                for &(_, a, na) in &s.nz[s.nz_row[node] as usize..s.nz_row[node + 1] as usize] {
                    g0[a as usize] += na * v0;
                    g1[a as usize] += na * v1;
                }
            }
        };
        for &change in self.input_changes.iter() {
            match change {
                InputStepChange::Law(a, b, d) => {
                    add(a, d, d);
                    add(b, -d, -d);
                }
                InputStepChange::Friction(i, ratio) => {
                    // The element's force is -tau row^T.
                    let (d0, d1) = (-fric_tau[0][i] * ratio, -fric_tau[1][i] * ratio);
                    for &(node, c) in self.net.friction[i].row.entries.iter().take_while(|e| e.1 != 0.0) {
                        add(node, c * d0, c * d1);
                    }
                }
            }
        }
        true
    }

    /// Forms (once per step) the force change of every input step recorded since the last
    /// step, in the order of the steps, into `input_changes`: a law whose torque steps
    /// ([`Law::signal_step`]: sources, engine throttles) and a sliding friction element whose
    /// torque is proportional to the stepped signal
    /// ([`FrictionLaw::torque_signal`](crate::elements::FrictionLaw::torque_signal): clutch and
    /// brake normal forces, tyre loads), by the ratio `to / from - 1` of its change. Returns
    /// true when every stepped input's force change is in the record (false when a law that
    /// reads one has no `signal_step`, or a sliding element reads one from zero or through
    /// another signal).
    fn input_changes(&mut self) -> bool {
        if self.input_changes_ready.0 {
            return self.input_changes_ready.1;
        }
        self.input_changes.clear();
        let mut known = true;
        for &(k, from, to) in self.input_steps.iter() {
            let k = k as usize;
            let (l0, l1) = (self.input_law_start[k] as usize, self.input_law_start[k + 1] as usize);
            for &l in &self.input_laws[l0..l1] {
                match self.net.laws[l as usize].signal_step(k, from, to, &self.w) {
                    Some((a, b, d)) => self.input_changes.push(InputStepChange::Law(a, b, d)),
                    None => known = false,
                }
            }
            // (A sliding element's torque is proportional to a positive signal; inputs are
            // finite.)
            let sliding = self.readers[k] & self.sliding;
            if from <= 0.0 {
                known &= sliding == 0;
                continue;
            }
            let ratio = to.max(0.0) / from - 1.0;
            for i in bits(sliding) {
                if self.net.friction[i].law.torque_signal() == Some(k) {
                    self.input_changes.push(InputStepChange::Friction(i, ratio));
                } else {
                    known = false;
                }
            }
        }
        self.input_changes_ready = (true, known);
        known
    }

    /// Stage velocities `W_i = N Q_i` and angles `Phi_i = phi0 + h sum_j a_ij W_j`.
    fn stage_states(&mut self, h: f64) {
        self.stage_speeds();
        self.stage_angles(h);
    }

    /// Stage velocities `W_i = N Q_i` (plus the prescribed parts) from `ws.q`.
    fn stage_speeds(&mut self) {
        let n = self.net.n_dof;
        let s = &self.slots[self.cur];
        let m = s.m;
        let Work { q, w_st, wp, .. } = &mut self.ws;
        let [w0, w1] = w_st;
        s.n_times_each([&q[..m], &q[m..2 * m]], [&mut w0[..n], &mut w1[..n]]);
        if !s.rhs.is_empty() {
            for (wi, wp) in w_st.iter_mut().zip(wp.iter()) {
                for (x, p) in wi[..n].iter_mut().zip(&wp[..n]) {
                    *x += p;
                }
            }
        }
    }

    /// Stage angles `Phi_i = phi0 + h sum_j a_ij W_j` from the stage speeds in `ws.w_st`.
    fn stage_angles(&mut self, h: f64) {
        let n = self.net.n_dof;
        let Work { w_st, phi_st, .. } = &mut self.ws;
        let (w0, w1) = (&w_st[0][..n], &w_st[1][..n]);
        for (i, pi) in phi_st.iter_mut().enumerate() {
            let (a0, a1) = (h * A[i][0], h * A[i][1]);
            for (((p, phi), w0), w1) in pi[..n].iter_mut().zip(&self.phi[..n]).zip(w0).zip(w1) {
                *p = phi + a0 * w0 + a1 * w1;
            }
        }
    }

    /// Forces (and per-element powers) at the converged stages, once per sub-step.
    fn stage_forces(&mut self) {
        if self.ws.cache & 1 != 0 {
            return;
        }
        for i in 0..2 {
            self.stage_force(i);
        }
        self.ws.cache |= 1;
    }

    /// Forces and per-element powers at stage `i` of the current sub-step (its angles, speeds
    /// and signals), into the stage-force cache, torque-dependent friction corrected.
    fn stage_force(&mut self, i: usize) {
        let Work { phi_st, w_st, sig, f_st, law_power, law_diss, fric_power, fric_tau, .. } = &mut self.ws;
        Self::forces(
            &self.net,
            &self.modes,
            self.sliding,
            &self.regimes,
            &phi_st[i],
            &w_st[i],
            &sig[i],
            &mut f_st[i],
            Record::Powers(&mut law_power[i], &mut law_diss[i], &mut fric_power[i], &mut fric_tau[i]),
        );
        if self.torque_dependent & self.sliding != 0 {
            let Work { w_st, f_st, ls_a, dep_tau, fric_power, .. } = &mut self.ws;
            Self::torque_dependent_correct(
                &self.net,
                &self.slots[self.cur],
                &self.modes,
                self.torque_dependent & self.sliding,
                &w_st[i],
                &mut f_st[i],
                ls_a,
                dep_tau,
                Some(&mut fric_power[i]),
            );
        }
    }

    /// Constraint torques at the converged stages, once per sub-step: of every row when the
    /// slot asks for them all ([`ModeSlot::stage_rows_all`]), else of the lock rows and the
    /// rows their limits read (the others are left as they were; nothing reads them).
    fn stage_torques(&mut self) {
        if self.ws.cache & 2 != 0 {
            return;
        }
        self.stage_forces();
        let n = self.net.n_dof;
        let s = &self.slots[self.cur];
        for i in 0..2 {
            let Work { f_st, acc, xnz, lam_st, ud, .. } = &mut self.ws;
            if s.stage_rows_all {
                Self::constraint_torques(&self.net, s, &f_st[i], &ud[i], acc, xnz, &mut lam_st[i], n);
                continue;
            }
            // No prescribed rows here: the map applies to the forces themselves.
            let xnz = nonzeros(&f_st[i][..n], xnz);
            let np = self.net.rows.len();
            map_columns_from(&s.tmap, s.rstride, xnz, np, &mut lam_st[i][np..s.r]);
            for &g in s.stage_extra.iter() {
                let g = g as usize;
                // Ascending columns from +0.0, as `map_columns` sums each row.
                lam_st[i][g] = xnz.iter().fold(0.0, |acc, &(k, v)| acc + s.tmap[k as usize * s.rstride + g] * v);
            }
        }
        self.ws.cache |= 2;
    }

    /// Forces and constraint torques at the sub-step end (left-limit signals), once per sub-step.
    fn end_torques(&mut self) {
        if self.ws.cache & 4 != 0 {
            return;
        }
        let n = self.net.n_dof;
        let Work {
            phi1,
            w1,
            sig_end,
            f_end,
            acc,
            xnz,
            lam_end,
            ud,
            ls_a,
            dep_tau_end,
            fric_power_end,
            law_tau_end,
            law_diss_end,
            fric_tau_end,
            ..
        } = &mut self.ws;
        let record = Record::Torques(law_tau_end, law_diss_end, fric_tau_end, fric_power_end);
        Self::forces(&self.net, &self.modes, self.sliding, &self.regimes, phi1, w1, sig_end, f_end, record);
        if self.torque_dependent & self.sliding != 0 {
            Self::torque_dependent_correct(
                &self.net,
                &self.slots[self.cur],
                &self.modes,
                self.torque_dependent & self.sliding,
                w1,
                f_end,
                ls_a,
                dep_tau_end,
                Some(fric_power_end),
            );
        }
        Self::constraint_torques(&self.net, &self.slots[self.cur], f_end, &ud[2], acc, xnz, lam_end, n);
        self.ws.cache |= 4;
    }

    /// Accepts the integrated sub-step of size `h`: energy, state, time.
    fn commit(&mut self, h: f64) {
        if self.params.track_energy {
            self.stage_forces();
            for (k, law) in self.net.laws.iter().enumerate() {
                let p = h * (B[0] * self.ws.law_power[0][k] + B[1] * self.ws.law_power[1][k]);
                let d = h * (B[0] * self.ws.law_diss[0][k] + B[1] * self.ws.law_diss[1][k]);
                match law {
                    Law::Source { .. } | Law::Quadratic { .. } | Law::Engine { .. } => self.energy.input += p,
                    _ => self.energy.dissipated += d,
                }
            }
            // Only sliding elements dissipate (the others' powers are zero).
            for i in bits(self.sliding) {
                self.energy.dissipated += h * (B[0] * self.ws.fric_power[0][i] + B[1] * self.ws.fric_power[1][i]);
            }
            // Prescribed rows do work rho * lambda: speed sources put it in, kinematic clutches
            // take it out.
            if !self.slots[self.cur].rhs.is_empty() {
                self.stage_torques();
                let s = &self.slots[self.cur];
                for &(ra, src) in s.rhs.iter() {
                    let work = h
                        * (0..2)
                            .map(|i| B[i] * src.rate(&self.net.signals, self.t + C[i] * h).0 * self.ws.lam_st[i][ra])
                            .sum::<f64>();
                    if matches!(src, Rhs::Source(_)) {
                        self.energy.input += work;
                    } else {
                        self.energy.dissipated -= work;
                    }
                }
            }
        }
        self.phi.copy_from_slice(&self.ws.phi1);
        self.w.copy_from_slice(&self.ws.w1);
        self.zero_slips = None;
        self.t += h;
        if !self.slots[self.cur].linear {
            let ws = &mut self.ws;
            // The stages (and below, their reduced forces) become the predictor's record: the
            // buffers trade places (the next sub-step writes `q0`, `q` and `gq` before it
            // reads them).
            std::mem::swap(&mut ws.pred_q0, &mut ws.q0);
            std::mem::swap(&mut ws.pred_q, &mut ws.q);
            // (Only a force start reads them.)
            self.ws.pred_g_ok = self.ws.stage_g_ok && self.ws.force_start;
            if self.ws.pred_g_ok {
                std::mem::swap(&mut self.ws.pred_g, &mut self.ws.gq);
            }
            self.ws.pred_h = h;
            self.ws.pred_slot = self.cur;
            self.ws.pred_epoch = self.epoch;
        }
    }

    /// Dense output at `theta` in [0, 1] of the last integrated sub-step into `ws.phi_e/w_e`
    /// (quadratic collocation polynomial through the start and the two stages).
    fn dense(&mut self, theta: f64) {
        let [l0, l1, l2] = lagrange(theta);
        for k in 0..self.w.len() {
            self.ws.w_e[k] = l0 * self.w[k] + l1 * self.ws.w_st[0][k] + l2 * self.ws.w_st[1][k];
            self.ws.phi_e[k] = l0 * self.phi[k] + l1 * self.ws.phi_st[0][k] + l2 * self.ws.phi_st[1][k];
        }
    }

    /// Event function `g` (event when `g > 0`) of kind `ev` at a sample of the last sub-step:
    /// a stage, the end, or the dense output at time `t` (already placed in `phi_e/w_e`).
    fn event_value(&mut self, ev: Ev, at: At, t: f64) -> f64 {
        match ev {
            Ev::Slip(i) => {
                let w = match at {
                    At::Stage(k) => &self.ws.w_st[k],
                    At::End => &self.ws.w1,
                    At::Dense => &self.ws.w_e,
                };
                self.slip_g(i, w)
            }
            Ev::Engage(i) | Ev::Release(i) => {
                let Some(k) = self.net.friction[i].law.free_signal() else { return -1.0 };
                let u = match at {
                    At::Stage(j) => self.ws.sig[j][k],
                    At::End => self.ws.sig_end[k],
                    At::Dense => self.net.signals[k].eval(t),
                };
                Self::force_g(ev, u)
            }
            Ev::Group => self.group_violation(at, t),
            Ev::Breakaway(i) => {
                let (lam, sig) = match at {
                    At::Stage(k) => {
                        self.stage_torques();
                        (&self.ws.lam_st[k], &self.ws.sig[k])
                    }
                    At::End => {
                        self.end_torques();
                        (&self.ws.lam_end, &self.ws.sig_end)
                    }
                    At::Dense => {
                        self.fill_signals(2, t, false);
                        self.constraint_torques_at_e(t);
                        (&self.ws.lam, &self.ws.sig[2])
                    }
                };
                let s = &self.slots[self.cur];
                let pos = s.locked.iter().position(|&k| k == i).unwrap_or(0);
                let w = match at {
                    At::Stage(k) => &self.ws.w_st[k],
                    At::End => &self.ws.w1,
                    At::Dense => &self.ws.w_e,
                };
                self.net.friction[i].law.hold_excess(self.capacity(i, sig), lam[self.net.rows.len() + pos], lam, w).0
            }
            Ev::Regime(k) => {
                if at == At::Dense {
                    self.fill_signals(2, t, false);
                }
                let (phi, w) = match at {
                    At::Stage(j) => (&self.ws.phi_st[j], &self.ws.w_st[j]),
                    At::End => (&self.ws.phi1, &self.ws.w1),
                    At::Dense => (&self.ws.phi_e, &self.ws.w_e),
                };
                let sig = match at {
                    At::Stage(j) => &self.ws.sig[j],
                    At::End => &self.ws.sig_end,
                    At::Dense => &self.ws.sig[2],
                };
                let st = self.regimes[k];
                if self.net.laws[k].next_regime(st, phi, w, sig) != st.regime { 1.0 } else { -1.0 }
            }
        }
    }

    /// Constraint torques `lambda` of the current mode at `(phi_e, w_e)` with signals `sig[2]`.
    fn constraint_torques_at_e(&mut self, t: f64) {
        let n = self.net.n_dof;
        self.prescribed(t, 3);
        let Work { phi_e, w_e, sig, f, acc, lam, xnz, ud, ls_a, dep_tau, .. } = &mut self.ws;
        Self::forces(&self.net, &self.modes, self.sliding, &self.regimes, phi_e, w_e, &sig[2], f, Record::Nothing);
        let dependent = self.torque_dependent & self.sliding;
        if dependent != 0 {
            let s = &self.slots[self.cur];
            Self::torque_dependent_correct(&self.net, s, &self.modes, dependent, w_e, f, ls_a, dep_tau, None);
        }
        Self::constraint_torques(&self.net, &self.slots[self.cur], f, &ud[3], acc, xnz, lam, n);
    }

    /// Prescribed parts of speed and acceleration at `t` into `wp[idx]`, `ud[idx]`.
    fn prescribed(&mut self, t: f64, idx: usize) {
        self.prescribed_in(self.cur, t, idx);
    }

    fn prescribed_in(&mut self, slot: usize, t: f64, idx: usize) {
        let n = self.net.n_dof;
        let s = &self.slots[slot];
        if s.rhs.is_empty() {
            return;
        }
        let (wp, ud) = (&mut self.ws.wp[idx], &mut self.ws.ud[idx]);
        wp[..n].fill(0.0);
        ud[..n].fill(0.0);
        for (j, &(_, src)) in s.rhs.iter().enumerate() {
            let (rho, drho) = src.rate(&self.net.signals, t);
            for k in 0..n {
                let p = s.pmat[j * n + k];
                if p != 0.0 {
                    wp[k] += p * rho;
                    ud[k] += p * drho;
                }
            }
        }
    }

    /// `lambda = L (M a - f)` with `a = N Mr^-1 N^T (f - M ud) + ud`, `ud` the prescribed part
    /// of the acceleration (zero without prescribed rows), for every active row.
    fn constraint_torques(
        net: &Network,
        s: &ModeSlot,
        f: &[f64],
        ud: &[f64],
        acc: &mut [f64],
        xnz: &mut [(u32, f64)],
        lam: &mut [f64],
        n: usize,
    ) {
        let x = if s.rhs.is_empty() {
            &f[..n]
        } else {
            for k in 0..n {
                acc[k] = f[k] - net.mass[k] * ud[k];
            }
            &acc[..n]
        };
        map_columns(&s.tmap, s.rstride, nonzeros(x, xnz), &mut lam[..s.r]);
    }

    /// Looks for state events in the last integrated sub-step. Returns the earliest located
    /// `theta` and the friction elements to force into the stuck-candidate set.
    fn detect_event(&mut self, h: f64) -> Option<(f64, u64, u64)> {
        let t0 = self.t;
        let mut best: Option<(f64, Ev)> = None;
        let mut forced: u64 = 0;
        // Slips located in this sub-step: a mask, their thetas in `ws.slip_theta`.
        let mut slipped: u64 = 0;
        // Break-aways located in this sub-step (their thetas in `ws.slip_theta` too).
        let mut breaking_at: u64 = 0;
        let nf = self.net.friction.len();
        let suspects = self.breakaway_suspects(h);
        // Called for the events whose cheap screen ([`Simulation::may_trigger`]) passed.
        let consider = |this: &mut Self, ev: Ev, best: &mut Option<(f64, Ev)>| -> Option<f64> {
            // Sample at the stages and the end, bracket, locate.
            let mut lo = 0.0;
            for (th, at) in [(C[0], At::Stage(0)), (C[1], At::Stage(1)), (1.0, At::End)] {
                if this.event_value(ev, at, t0 + th * h) > 0.0 {
                    let theta = this.locate(ev, lo, th, h);
                    if best.is_none_or(|b| theta < b.0) {
                        *best = Some((theta, ev));
                    }
                    return Some(theta);
                }
                lo = th;
            }
            None
        };
        // In element order (the first of equal event times wins): the sliding elements, the
        // elements under an unsteady normal force, and the break-away suspects.
        let watch = self.force_watch;
        for i in bits((self.sliding | watch | suspects) & low_bits(nf)) {
            let watched = watch & 1 << i != 0;
            let mode = self.modes[i];
            match mode {
                FrictionMode::Forward | FrictionMode::Backward => {
                    if self.may_trigger(Ev::Slip(i))
                        && let Some(th) = consider(self, Ev::Slip(i), &mut best)
                    {
                        self.ws.slip_theta[i] = th;
                        slipped |= 1 << i;
                    }
                    if watched && self.may_trigger(Ev::Release(i)) {
                        consider(self, Ev::Release(i), &mut best);
                    }
                }
                FrictionMode::Free => {
                    if watched && self.may_trigger(Ev::Engage(i)) {
                        consider(self, Ev::Engage(i), &mut best);
                    }
                }
                FrictionMode::Stuck => {
                    if watched && self.may_trigger(Ev::Release(i)) {
                        consider(self, Ev::Release(i), &mut best);
                    }
                    // Break-away, sampled at both stages and the end so that a torque peak
                    // inside the step is not missed, then located on the dense output.
                    if suspects & (1 << i) != 0
                        && !self.slots[self.cur].redundant
                        && let Some(th) = consider(self, Ev::Breakaway(i), &mut best)
                    {
                        self.ws.slip_theta[i] = th;
                        breaking_at |= 1 << i;
                    }
                }
            }
        }
        if self.slots[self.cur].redundant && suspects != 0 {
            consider(self, Ev::Group, &mut best);
        }
        for k in 0..self.net.laws.len() {
            if self.net.laws[k].has_regimes() {
                consider(self, Ev::Regime(k), &mut best);
            }
        }
        let (theta, ev) = best?;
        let tol = (self.params.event_time_tolerance / h).max(1e-12) * 4.0;
        // The elements of `mask` whose located theta is that of the event, to tolerance.
        let at_theta = |mask: u64| {
            let mut out = 0;
            for i in bits(mask) {
                if self.ws.slip_theta[i] <= theta + tol {
                    out |= 1 << i;
                }
            }
            out
        };
        forced |= at_theta(slipped);
        // Every break-away located at the same instant goes together (two symmetric wheels
        // breaking loose at once): resolving one at a time would find the other's event at
        // the very start of the next sub-step, and the first one stuck again.
        let breaking = if let Ev::Breakaway(_) = ev { at_theta(breaking_at) } else { 0 };
        Some((theta.clamp(0.0, 1.0), forced, breaking))
    }

    /// The stuck elements whose break-away test may fire in the last sub-step, as a mask: the
    /// others need no event search. One pass over the locked rows at the samples
    /// [`Simulation::event_value`] takes (both stages and the end; only the end when a
    /// non-redundant mode holds every lock with [`STAGE_SAMPLE_MARGIN`] of its limit to spare
    /// there, no signal may turn inside the sub-step and the mode's fastest oscillation turns
    /// at most [`MAX_SKIP_OMEGA_H`] in it, which spares the stage constraint torques on most
    /// steps of a vehicle). A non-redundant mode marks
    /// each element whose break-away function is positive at a sample; a redundant one marks
    /// every element when the minimum-norm split is not strictly inside every limit at every
    /// sample (the first certificate of [`Simulation::group_violation`]; a LossyGear always
    /// takes the group test).
    fn breakaway_suspects(&mut self, h: f64) -> u64 {
        if self.slots[self.cur].locked.is_empty() {
            return 0;
        }
        let redundant = self.slots[self.cur].redundant;
        self.end_torques();
        let np = self.net.rows.len();
        let s = &self.slots[self.cur];
        let resolved = s.omega2 * h * h <= MAX_SKIP_OMEGA_H * MAX_SKIP_OMEGA_H;
        if !redundant && !self.signals_turn && resolved {
            // Every lock held with a quarter of its limit to spare at the end needs no stage
            // samples: between the step start, where it was held, and the end its torque
            // follows the smooth stage polynomial, which does not climb a quarter of the limit
            // and fall back within one step (what steps at the start, a throttle cut or a
            // pressure, is seen at the end already). Not while a signal may itself rise and
            // fall back inside the sub-step: a 60 Hz sine torque at 60 Hz steps is the same at
            // every step end, and breaks a lock away at the stages
            // (`tests/elements.rs`, `a_pulsating_torque_breaks_away_between_step_ends`). Nor
            // while the mode's fastest oscillation turns more than `MAX_SKIP_OMEGA_H` rad in
            // the sub-step: a shaft ringing at 20 Hz at 60 Hz steps can carry a lock's torque
            // past its limit between two step ends well inside it
            // (`a_ringing_shaft_breaks_away_between_step_ends`).
            let Work { lam_end, sig_end, w1, .. } = &self.ws;
            let deep = self.slots[self.cur].locked.iter().enumerate().all(|(pos, &i)| {
                let (g, limit) =
                    self.net.friction[i].law.hold_excess(self.capacity(i, sig_end), lam_end[np + pos], lam_end, w1);
                g < -STAGE_SAMPLE_MARGIN * limit
            });
            if deep {
                return 0;
            }
        }
        self.stage_torques();
        let Work { lam_st, lam_end, sig, sig_end, w_st, w1, .. } = &self.ws;
        let samples = [(&lam_st[0], &sig[0], &w_st[0]), (&lam_st[1], &sig[1], &w_st[1]), (lam_end, sig_end, w1)];
        if redundant {
            let all_inside =
                samples.iter().all(|&(lam, sig, w)| self.min_norm_inside(lam, w, |i| self.capacity(i, sig)));
            return if all_inside { 0 } else { u64::MAX };
        }
        let mut mask = 0;
        for (pos, &i) in self.slots[self.cur].locked.iter().enumerate() {
            let law = &self.net.friction[i].law;
            for &(lam, sig, w) in &samples {
                if law.hold_excess(self.capacity(i, sig), lam[np + pos], lam, w).0 > 0.0 {
                    mask |= 1 << i;
                    break;
                }
            }
        }
        mask
    }

    /// Static capacity of friction element `i` under signals `sig`: with steady signals, the
    /// one the last full pass (a mode selection or an input-change test) computed.
    #[inline]
    fn capacity(&self, i: usize, sig: &[f64]) -> Capacity {
        if self.unsteady.is_empty() && self.caps_all_gen == self.sig_gen {
            self.ws.caps[i]
        } else {
            self.net.friction[i].law.capacity(sig)
        }
    }

    /// True when the current mode's minimum-norm split (`lam` at speeds `w`) holds every lock
    /// strictly inside its static limit (capacities from `cap`), with a margin of 1e-9 of the
    /// limit. A LossyGear's bounds move with the split itself: never certified here.
    fn min_norm_inside(&self, lam: &[f64], w: &[f64], cap: impl Fn(usize) -> Capacity) -> bool {
        let np = self.net.rows.len();
        self.slots[self.cur].locked.iter().enumerate().all(|(pos, &i)| {
            let law = &self.net.friction[i].law;
            if matches!(law, crate::elements::FrictionLaw::Lossy { .. }) {
                return false;
            }
            let (g, limit) = law.hold_excess(cap(i), lam[np + pos], lam, w);
            g < -1e-9 * limit.max(1e-300)
        })
    }

    /// A cheap screen before the sampling of [`Simulation::detect_event`]: false when the event
    /// function of a slip, engage or release event (the same `slip_g` / `force_g` that
    /// [`Simulation::event_value`] uses, without its dispatch) is positive at none of the three
    /// samples; true for the kinds that need constraint torques or regimes.
    #[inline]
    fn may_trigger(&self, ev: Ev) -> bool {
        match ev {
            Ev::Slip(i) => {
                // `slip_g` at the three samples, in one pass over the row.
                let d = -self.modes[i].dir();
                let g = self.net.friction[i].row.dot3([&self.ws.w_st[0], &self.ws.w_st[1], &self.ws.w1]);
                g.iter().any(|&g| d * g > 0.0)
            }
            Ev::Engage(i) | Ev::Release(i) => {
                let Some(k) = self.net.friction[i].law.free_signal() else { return false };
                [self.ws.sig[0][k], self.ws.sig[1][k], self.ws.sig_end[k]].iter().any(|&u| Self::force_g(ev, u) > 0.0)
            }
            Ev::Group | Ev::Breakaway(_) | Ev::Regime(_) => true,
        }
    }

    /// Slip event function of sliding element `i` at speeds `w`: positive once the slip has
    /// reversed against the sliding direction.
    fn slip_g(&self, i: usize, w: &[f64]) -> f64 {
        -self.modes[i].dir() * self.net.friction[i].row.dot(w)
    }

    /// Engage (release) event function from the normal-force signal `u`: positive once the
    /// force is on (off).
    fn force_g(ev: Ev, u: f64) -> f64 {
        if matches!(ev, Ev::Engage(_)) { u } else { -u }
    }

    /// Locates the first `theta` in `(lo, hi]` where the event function becomes positive,
    /// returning a point where it is positive (the right end of the final bracket), or 0 for a
    /// lock over its limit at the sub-step start.
    fn locate(&mut self, ev: Ev, mut lo: f64, mut hi: f64, h: f64) -> f64 {
        let t0 = self.t;
        let mut g_lo = if lo == 0.0 {
            self.dense(0.0);
            let g0 = self.event_value(ev, At::Dense, t0);
            // A lock already over its limit at the sub-step start (an input stepped): the
            // modes are selected there, before any motion. The selection releases something:
            // a located break-away is forced to go, and a group's function is positive only
            // beyond the classification tolerance. Slip events keep the bracket: a slip of
            // rounding size at the start is not a reversal.
            if g0 > 0.0 && matches!(ev, Ev::Breakaway(_) | Ev::Group) {
                return 0.0;
            }
            g0.min(0.0)
        } else {
            self.dense(lo);
            self.event_value(ev, At::Dense, t0 + lo * h)
        };
        let mut g_hi = if hi == 1.0 {
            self.event_value(ev, At::End, t0 + h)
        } else {
            self.dense(hi);
            self.event_value(ev, At::Dense, t0 + hi * h)
        };
        let tol = self.params.event_time_tolerance / h;
        let mut k = 0;
        while (hi - lo) > tol && k < 200 {
            k += 1;
            // Alternate secant and bisection: superlinear on smooth functions, and never
            // slower than bisection.
            let mid = if k % 2 == 1 && g_hi > g_lo && g_lo <= 0.0 {
                let s = lo + (hi - lo) * (-g_lo) / (g_hi - g_lo);
                s.clamp(lo + 0.01 * (hi - lo), hi - 0.01 * (hi - lo))
            } else {
                0.5 * (lo + hi)
            };
            self.dense(mid);
            let g = self.event_value(ev, At::Dense, t0 + mid * h);
            if g > 0.0 {
                hi = mid;
                g_hi = g;
            } else {
                lo = mid;
                g_lo = g;
            }
        }
        hi
    }

    /// Resolves the modes of all friction elements at the current time and state.
    /// `forced` marks elements whose slip just crossed zero (they become stuck candidates).
    fn select_modes(&mut self, forced: u64, initial: bool) {
        self.epoch += 1;
        // The record of the input steps' force changes lists the sliding elements of before.
        self.input_changes_ready = (false, false);
        self.zero_slips = None;
        let n = self.net.n_dof;
        let nf = self.net.friction.len();
        // Energy just before the instant (left-limit signals, old regimes and modes): what the
        // switch removes (a lock impact, a released backlash spring, a limit step) is dissipated.
        self.fill_signals(0, self.t, true);
        let (ke0, pe0) = self.kinetic_potential(0);
        self.fill_signals(2, self.t, false);
        // Law regimes from the state.
        for k in 0..self.net.laws.len() {
            let law = &self.net.laws[k];
            let new = law.next_regime(self.regimes[k], &self.phi, &self.w, &self.ws.sig[2]);
            if new != self.regimes[k].regime {
                // The law's Jacobian changed: every cached Newton matrix is stale.
                for slot in &mut self.slots {
                    slot.newton_h = f64::NAN;
                }
                let from = self.law_mode(k);
                let law = &self.net.laws[k];
                law.enter(&mut self.regimes[k], new, &self.phi, &self.w, &self.ws.sig[2]);
                if let (Some(from), Some(to)) = (from, self.law_mode(k))
                    && from != to
                    && !initial
                    && self.events.has_room()
                {
                    let element = self.net.law_element[k];
                    self.events.push(ModeEvent { time: self.t, element, from, to });
                }
            }
        }
        self.switch_kinematic_clutches(initial);
        let wscale = self.w[..n].iter().fold(1.0f64, |s, v| s.max(v.abs()));
        let tol_w = 1e-12 * wscale;
        let mut any_candidate = false;
        for i in 0..nf {
            let fe = &self.net.friction[i];
            let cap = fe.law.capacity(&self.ws.sig[2]);
            self.ws.caps[i] = cap;
            let wr = fe.row.dot(&self.w);
            self.ws.candidate[i] = false;
            self.ws.new_modes[i] = if cap.free {
                FrictionMode::Free
            } else if forced & (1 << i) != 0 || wr.abs() <= tol_w || (self.modes[i] == FrictionMode::Stuck && !initial)
            {
                self.ws.candidate[i] = true;
                any_candidate = true;
                FrictionMode::Stuck
            } else if wr > 0.0 {
                FrictionMode::Forward
            } else if cap.one_way {
                // A freewheel never slides backwards: it locks (the projection is the impact).
                self.ws.candidate[i] = true;
                any_candidate = true;
                FrictionMode::Stuck
            } else {
                FrictionMode::Backward
            };
        }
        self.caps_all_gen = self.sig_gen;
        self.caps_stale = Some(0);
        if any_candidate {
            // Forces with the sliding torques of the non-candidates, none from candidates.
            let saved = std::mem::take(&mut self.modes);
            let mut tmp_modes = std::mem::take(&mut self.ws.new_modes);
            {
                let Work { sig, f, candidate, .. } = &mut self.ws;
                // Candidates carry no torque in b: give them Free for the force evaluation.
                for i in 0..nf {
                    if candidate[i] {
                        tmp_modes[i] = FrictionMode::Free;
                    }
                }
                let sliding = sliding_mask(&tmp_modes);
                Self::forces(
                    &self.net,
                    &tmp_modes,
                    sliding,
                    &self.regimes,
                    &self.phi,
                    &self.w,
                    &sig[2],
                    f,
                    Record::Nothing,
                );
                for i in 0..nf {
                    if candidate[i] {
                        tmp_modes[i] = FrictionMode::Stuck;
                    }
                }
            }
            self.ws.new_modes = tmp_modes;
            self.modes = saved;
            // The problem is posed under the base constraints: permanent rows and engaged
            // kinematic clutches (with their prescribed accelerations).
            let base_key = Self::lock_key(&[], &self.kin_engaged) << self.net.friction.len();
            let base = self.slot_for(base_key);
            let dependent = self.torque_dependent & sliding_mask(&self.ws.new_modes);
            if dependent != 0 {
                let Work { f, ls_a, dep_tau, new_modes, .. } = &mut self.ws;
                Self::torque_dependent_correct(
                    &self.net,
                    &self.slots[base],
                    new_modes,
                    dependent,
                    &self.w,
                    f,
                    ls_a,
                    dep_tau,
                    None,
                );
            }
            self.compute_qp(base);
            self.prescribed_in(base, self.t, 3);
            self.resolve_candidates(base);
        }
        // Apply: compile/fetch the mode, project speeds onto new locks, record events.
        let new_key = Self::lock_key(&self.ws.new_modes, &self.kin_engaged);
        let old_key = if self.slots[self.cur].valid { self.slots[self.cur].key } else { 0 };
        if new_key != self.slots[self.cur].key || !self.slots[self.cur].valid || initial {
            self.cur = self.slot_for(new_key);
        }
        if new_key & !old_key != 0 || initial {
            self.project();
        }
        for i in 0..nf {
            let (from, to) = (self.modes[i], self.ws.new_modes[i]);
            if from != to || initial {
                if !initial && self.events.has_room() {
                    self.events.push(ModeEvent { time: self.t, element: self.net.friction[i].element, from, to });
                }
                self.modes[i] = to;
            }
        }
        self.sliding = sliding_mask(&self.modes);
        self.free = mask_where(&self.modes, |&m| m == FrictionMode::Free);
        if !initial {
            let (ke1, pe1) = self.kinetic_potential(2);
            self.energy.dissipated += (ke0 + pe0) - (ke1 + pe1);
        }
    }

    /// After run-time inputs changed: true when no mode or regime changes at once under the new
    /// signals, so the complementarity solve can be skipped: no element gains or loses its
    /// normal force, no law changes regime, every sliding element still slips. Stuck elements
    /// are not tested here: their torques need a force evaluation, and the break-away samples
    /// of the sub-step do it anyway ([`Simulation::locate`] puts a limit already exceeded at
    /// the sub-step start at `theta = 0`, where the modes are selected before any motion). The
    /// energy a limit step removes is booked as `select_modes` would. Conservative: kinematic
    /// clutches and stuck LossyGears (whose limits move with the split) take the full solve.
    fn input_change_keeps_modes(&mut self) -> bool {
        if !self.net.kinematic.is_empty() {
            return false;
        }
        let t = self.t;
        self.fill_signals(2, t, false);
        for (k, law) in self.net.laws.iter().enumerate() {
            if law.has_regimes()
                && law.next_regime(self.regimes[k], &self.phi, &self.w, &self.ws.sig[2]) != self.regimes[k].regime
            {
                return false;
            }
        }
        // With steady signals and only inputs set by id changed since the last full pass, the
        // elements that read none of them keep their capacity (and their free or stuck mode;
        // a sliding one's direction is checked below whatever its inputs did).
        // A stuck LossyGear always takes a new mode selection (its bounds move with the
        // transmitted torque): visited whatever changed.
        let all = low_bits(self.net.friction.len());
        let visit = match self.caps_stale {
            Some(m) if self.unsteady.is_empty() && self.caps_all_gen != u64::MAX => m | self.lossy,
            _ => all,
        };
        // The sliding elements whose inputs did not change keep their capacity; their slip
        // direction is checked all the same.
        for i in bits(self.sliding & !visit) {
            let wr = self.net.friction[i].row.dot(&self.w);
            if wr == 0.0 || wr.signum() != self.modes[i].dir() {
                return false;
            }
        }
        for i in bits(visit) {
            let fe = &self.net.friction[i];
            let cap = fe.law.capacity(&self.ws.sig[2]);
            self.ws.caps[i] = cap;
            match self.modes[i] {
                FrictionMode::Free => {
                    if !cap.free {
                        return false;
                    }
                }
                FrictionMode::Stuck => {
                    if cap.free || matches!(fe.law, crate::elements::FrictionLaw::Lossy { .. }) {
                        return false;
                    }
                }
                m => {
                    let wr = fe.row.dot(&self.w);
                    if cap.free || wr == 0.0 || wr.signum() != m.dir() {
                        return false;
                    }
                }
            }
        }
        self.caps_all_gen = self.sig_gen;
        self.caps_stale = Some(0);
        // What a step in a limit removes (none for the kept modes but an elastic clutch's
        // stored T_s^2 / 2S): booked like a mode switch.
        // Only potentials read signals (the kinetic energy is the same on both sides).
        let signal_potential = self.net.laws.iter().any(|l| matches!(l, Law::ElasticClutch { .. } | Law::Dog { .. }));
        if self.params.track_energy && signal_potential {
            self.fill_signals(0, t, true);
            let (_, pe0) = self.kinetic_potential(0);
            let (_, pe1) = self.kinetic_potential(2);
            self.energy.dissipated += pe0 - pe1;
        }
        true
    }

    /// At the start of a step after inputs changed: the predictor is told to follow the steps,
    /// and the modes are selected again unless they are known to hold with the new inputs.
    /// (Out of line: inlined, it changed the code generated for the rest of `step` by more than
    /// its own cost.)
    #[inline(never)]
    fn after_input_change(&mut self) {
        self.inputs_changed = false;
        // The first sub-step's predictor follows the recorded input steps.
        self.input_jump = self.params.newton_start != NewtonStart::Extrapolate && !self.input_steps.is_empty();
        if !self.input_change_keeps_modes() || self.input_step_breaks_a_lock() {
            self.select_modes(0, false);
        }
    }

    /// After an input change that keeps the modes: true when a lock's torque right after the
    /// change, at the step start, is past its static limit there. MSL re-evaluates the modes at
    /// a discontinuity; the sub-step's own samples would see the excess only if it lasted until
    /// its first stage, and a lock whose torque relaxes faster (a stiff damper, a sliding
    /// tyre's slip) would then hold through a torque it cannot carry.
    ///
    /// The torques come from the last step's end, `lambda(t0+) = lambda(t0-) + T dF`, where
    /// `dF` is the force change of the stepped inputs (torque sources and engine throttles by
    /// [`Law::signal_step`], sliding clutches, brakes and tyres by their proportionality to
    /// the stepped force); when those end torques do not describe this state, or a stepped
    /// input's force change is not known that way, the forces are evaluated at the start.
    fn input_step_breaks_a_lock(&mut self) -> bool {
        let s = &self.slots[self.cur];
        if s.locked.is_empty() {
            return false;
        }
        let (r, rs, n) = (s.r, s.rstride, self.net.n_dof);
        let end_valid = self.ws.cache & 4 != 0 && s.rhs.is_empty() && self.torque_dependent & self.sliding == 0;
        let known = self.input_changes();
        let s = &self.slots[self.cur];
        // The force change, node by node (a few entries).
        let mut df = [(0u32, 0.0f64); 16];
        let mut len = 0;
        let mut fits = true;
        let mut push = |node: usize, v: f64| {
            if node >= n || v == 0.0 {
                return;
            }
            if len == df.len() {
                fits = false;
                return;
            }
            df[len] = (node as u32, v);
            len += 1;
        };
        for &change in self.input_changes.iter() {
            match change {
                InputStepChange::Law(a, b, d) => {
                    push(a, d);
                    push(b, -d);
                }
                InputStepChange::Friction(i, ratio) => {
                    // The element's force is -tau row^T.
                    let d = -self.ws.fric_tau_end[i] * ratio;
                    for &(node, c) in self.net.friction[i].row.entries.iter().take_while(|e| e.1 != 0.0) {
                        push(node, c * d);
                    }
                }
            }
        }
        let exact = end_valid && known && fits;
        // The locks to test: all of them when a force changed; otherwise those whose limit
        // reads a stepped input (the others held at the last step's end with these torques
        // and limits).
        let mut test = u64::MAX;
        if exact && len == 0 {
            test = self.input_steps.iter().fold(0, |m, &(k, _, _)| m | self.readers[k as usize]);
            if test & s.locked.iter().fold(0u64, |m, &i| m | 1 << i) == 0 {
                return false;
            }
        }
        if exact {
            let Work { lam_start, lam_end, .. } = &mut self.ws;
            lam_start[..r].copy_from_slice(&lam_end[..r]);
            map_columns_onto(&s.tmap, rs, &df[..len], 0, &mut lam_start[..r]);
        } else {
            self.ws.phi_e.copy_from_slice(&self.phi);
            self.ws.w_e.copy_from_slice(&self.w);
            self.constraint_torques_at_e(self.t);
            let Work { lam_start, lam, .. } = &mut self.ws;
            lam_start[..r].copy_from_slice(&lam[..r]);
        }
        // (`input_change_keeps_modes` left every element's capacity with the new inputs in
        // `ws.caps`.)
        let s = &self.slots[self.cur];
        let (lam, caps) = (&self.ws.lam_start, &self.ws.caps);
        if s.redundant {
            if self.min_norm_inside(lam, &self.w, |i| caps[i]) {
                return false;
            }
            // The capacity-weighted split is the second certificate (as at the samples); the
            // complementarity solve of the mode selection decides the rest.
            if exact {
                let Work { f, f_end, w_e, .. } = &mut self.ws;
                f.copy_from_slice(f_end);
                for &(node, v) in &df[..len] {
                    f[node as usize] += v;
                }
                w_e.copy_from_slice(&self.w);
            }
            let Work { sig, caps, .. } = &mut self.ws;
            Self::stuck_capacities(&self.net, &self.modes, &sig[2], caps);
            return !self.weighted_split_inside(At::Dense);
        }
        let np = self.net.rows.len();
        s.locked.iter().enumerate().any(|(pos, &i)| {
            test & 1 << i != 0 && self.net.friction[i].law.hold_excess(caps[i], lam[np + pos], lam, &self.w).0 > 0.0
        })
    }

    /// Kinematic clutches (seed 000): a rising command starts engagement (the relative speed is
    /// prescribed to fall linearly to zero over the shift time, then held), a falling one starts
    /// the release (the last torque ramps down to zero over the shift time). Both ramps are
    /// signals rewritten here, so their ends are ordinary time events.
    fn switch_kinematic_clutches(&mut self, initial: bool) {
        let t = self.t;
        let mut changed = false;
        for j in 0..self.net.kinematic.len() {
            let kc = self.net.kinematic[j].clone();
            let cmd = self.ws.sig[2][kc.command] > 0.5;
            if cmd && !self.kin_engaged[j] {
                let w0 = kc.row.dot(&self.w);
                let ramp = Signal::Ramp { height: -w0, duration: kc.shift_time, offset: w0, start_time: t };
                self.net.signals[kc.rho_signal] = ramp;
                self.net.signals[kc.tau_signal] = Signal::Constant(0.0);
                self.kin_engaged[j] = true;
                changed = true;
            } else if !cmd && self.kin_engaged[j] {
                // The torque it carried just before: its constraint torque now.
                self.ws.phi_e.copy_from_slice(&self.phi);
                self.ws.w_e.copy_from_slice(&self.w);
                self.constraint_torques_at_e(t);
                let s = &self.slots[self.cur];
                let pos = s.kin.iter().position(|&k| k == j).map(|p| self.net.rows.len() + s.locked.len() + p);
                let tau_hold = pos.map_or(0.0, |p| -self.ws.lam[p]);
                let ramp = Signal::Ramp { height: -tau_hold, duration: kc.shift_time, offset: tau_hold, start_time: t };
                self.net.signals[kc.tau_signal] = ramp;
                self.net.signals[kc.rho_signal] = Signal::Constant(0.0);
                self.kin_engaged[j] = false;
                changed = true;
            }
        }
        if changed {
            self.signals_changed(true);
        }
        if changed {
            self.fill_signals(2, t, false);
            self.next_time_event = self.compute_next_time_event(t);
        }
        // Reported modes: engaging slides in the direction of the remaining slip.
        for j in 0..self.net.kinematic.len() {
            let kc = &self.net.kinematic[j];
            let mode = if !self.kin_engaged[j] {
                FrictionMode::Free
            } else {
                let rho = self.ws.sig[2][kc.rho_signal];
                if rho > 0.0 {
                    FrictionMode::Forward
                } else if rho < 0.0 {
                    FrictionMode::Backward
                } else {
                    FrictionMode::Stuck
                }
            };
            if mode != self.kin_modes[j] {
                if !initial && self.events.has_room() {
                    let from = self.kin_modes[j];
                    self.events.push(ModeEvent { time: t, element: kc.element, from, to: mode });
                }
                self.kin_modes[j] = mode;
            }
        }
    }

    /// Mass-weighted projection of the speeds onto the current mode's constraints (momentum
    /// conserving; the kinetic energy it removes is booked by `select_modes`).
    fn project(&mut self) {
        let n = self.net.n_dof;
        self.prescribed(self.t, 3);
        let s = &self.slots[self.cur];
        let m = s.m;
        let rhs = !s.rhs.is_empty();
        let wp = &self.ws.wp[3];
        let q = &mut self.ws.fq;
        for a in 0..m {
            q[a] = (0..n)
                .map(|k| s.nmat[k * n + a] * self.net.mass[k] * if rhs { self.w[k] - wp[k] } else { self.w[k] })
                .sum();
        }
        if m > 0 {
            linalg::lu_solve(&s.mr_lu, m, &s.mr_piv, &mut q[..m]);
        }
        for k in 0..n {
            self.w[k] = (0..m).map(|j| s.nmat[k * n + j] * q[j]).sum::<f64>() + if rhs { wp[k] } else { 0.0 };
        }
    }

    /// Solves the boxed complementarity problem of the `k` candidates in `ws.qp_idx` under the
    /// base slot (LossyGear bounds iterated with the transmitted torque). Returns the Tikhonov
    /// regularisation used, so callers can recover the unregularised accelerations.
    fn qp_solve(&mut self, base: usize, k: usize) -> f64 {
        let n = self.net.n_dof;
        let nf = self.net.friction.len();
        let dependent_candidates = (0..k).any(|a| self.torque_dependent & 1 << self.ws.qp_idx[a] != 0);
        // LossyGear bounds depend on the transmitted torque, which depends on the solution:
        // first solve with them open, then iterate bounds <- torque to a fixed point.
        let passes = if dependent_candidates { 10 } else { 1 };
        // The matrix W (with its Tikhonov term) is rebuilt, and its free-block factors dropped,
        // only when the base mode or the candidate set change.
        let mask = (0..k).fold(0u64, |m, a| m | 1 << self.ws.qp_idx[a]);
        let id = (self.slots[base].key, self.slots[base].generation, mask);
        if self.ws.qp_matrix != id {
            self.ws.qp_matrix = id;
            self.ws.qp_factored = u64::MAX;
            let mut dmax: f64 = 0.0;
            for a in 0..k {
                let ia = self.ws.qp_idx[a];
                for b in 0..k {
                    let ib = self.ws.qp_idx[b];
                    self.ws.qp_w[a * k + b] = self.qp_full[ia * nf + ib];
                }
                dmax = dmax.max(self.qp_full[ia * nf + ia]);
            }
            self.ws.qp_eps = 1e-12 * dmax.max(1e-300);
            for a in 0..k {
                self.ws.qp_w[a * k + a] += self.ws.qp_eps;
            }
        }
        let eps = self.ws.qp_eps;
        for pass in 0..passes {
            for a in 0..k {
                let ia = self.ws.qp_idx[a];
                self.ws.qp_rhs[a] = self.ws.qp_b[ia];
                let (lo, hi) = match &self.net.friction[ia].law {
                    crate::elements::FrictionLaw::Lossy { table, .. } => {
                        if pass == 0 {
                            (f64::NEG_INFINITY, f64::INFINITY)
                        } else {
                            // lambda = -tauLoss.
                            let (l, h) = table.at(0.0).standstill_bounds(self.ws.dependent_input[ia]);
                            (-h, -l)
                        }
                    }
                    law @ crate::elements::FrictionLaw::Ramp { carrier, .. } => {
                        // The input torque of the last pass (or of the last solve).
                        let tm = law.ramp_limit(self.ws.dependent_input[ia], self.w[*carrier]).unwrap_or(0.0);
                        (-tm, tm)
                    }
                    _ => {
                        let tm = self.ws.caps[ia].tau_max;
                        (-tm, if self.ws.caps[ia].one_way { f64::INFINITY } else { tm })
                    }
                };
                self.ws.qp_lo[a] = lo;
                self.ws.qp_hi[a] = hi;
            }
            // Warm start from the last solution when every candidate has one (the active set
            // rarely changes from one solve to the next); the optimum is unique either way.
            let warm = (0..k).all(|a| self.ws.warm_ok[self.ws.qp_idx[a]]);
            if warm {
                for a in 0..k {
                    let ia = self.ws.qp_idx[a];
                    self.ws.qp_x[a] = self.ws.warm_x[ia];
                    self.ws.qp_state[a] = self.ws.warm_state[ia];
                }
            }
            box_qp(
                k,
                &self.ws.qp_w,
                &self.ws.qp_rhs,
                &self.ws.qp_lo,
                &self.ws.qp_hi,
                &mut self.ws.qp_x,
                &mut self.ws.qp_state,
                &mut self.ws.qp_fact,
                &mut self.ws.qp_piv,
                &mut self.ws.qp_factored,
                &mut self.ws.lam,
                warm,
            );
            for a in 0..k {
                let ia = self.ws.qp_idx[a];
                self.ws.warm_x[ia] = self.ws.qp_x[a];
                self.ws.warm_state[ia] = self.ws.qp_state[a];
                self.ws.warm_ok[ia] = true;
            }
            if !dependent_candidates {
                break;
            }
            // Transmitted torques tau_a = -lambda_L - lambda_G under the base constraints
            // with the candidate torques applied.
            let Work { f, qp_extra, qp_x, qp_idx, ls_a, acc, xnz, lam, ud, dependent_input, .. } = &mut self.ws;
            for kk in 0..n {
                ls_a[kk] = f[kk] + qp_extra[kk];
            }
            for a in 0..k {
                self.net.friction[qp_idx[a]].row.add_scaled(ls_a, qp_x[a]);
            }
            Self::constraint_torques(&self.net, &self.slots[base], ls_a, &ud[3], acc, xnz, lam, n);
            let mut change: f64 = 0.0;
            let mut scale: f64 = 1e-300;
            for a in 0..k {
                let ia = qp_idx[a];
                let law = &self.net.friction[ia].law;
                let ta = match law {
                    crate::elements::FrictionLaw::Lossy { gear_row, .. } => -qp_x[a] - lam[*gear_row],
                    crate::elements::FrictionLaw::Ramp { .. } => law.ramp_input(lam),
                    _ => continue,
                };
                change = change.max((ta - dependent_input[ia]).abs());
                scale = scale.max(ta.abs());
                dependent_input[ia] = ta;
            }
            if pass > 0 && change <= 1e-12 * scale {
                break;
            }
        }
        eps
    }
    /// `b_i = B_i f` for all friction rows (the stuck ones when `stuck_only`) from `ws.f` (the
    /// relative accelerations without the candidates' torques), plus the prescribed part
    /// `R u - B M u`, `u = P rho'` (`ws.ud[3]`).
    fn qp_rhs(&mut self, prescribed: bool, stuck_only: bool) {
        let n = self.net.n_dof;
        let nf = self.net.friction.len();
        for i in 0..nf {
            if stuck_only && self.modes[i] != FrictionMode::Stuck {
                continue;
            }
            let mut b: f64 = (0..n).map(|k| self.qp_bmap[i * n + k] * self.ws.f[k]).sum();
            if prescribed {
                let u = &self.ws.ud[3];
                b += self.net.friction[i].row.dot(u)
                    - (0..n).map(|k| self.qp_bmap[i * n + k] * self.net.mass[k] * u[k]).sum::<f64>();
            }
            self.ws.qp_b[i] = b;
        }
    }

    /// Static capacities of the stuck friction elements (the only ones a group test reads).
    fn stuck_capacities(net: &Network, modes: &[FrictionMode], sig: &[f64], caps: &mut [Capacity]) {
        for (k, fe) in net.friction.iter().enumerate() {
            if modes[k] == FrictionMode::Stuck {
                caps[k] = fe.law.capacity(sig);
            }
        }
    }

    /// The capacity-weighted split (`ModeSlot::tmap_w`) of the stuck torques at a sample, from
    /// the forces there (`f_st`, `f_end`, or `f` for the dense sample, which
    /// [`Simulation::constraint_torques_at_e`] fills) and `ws.caps`: true when it is strictly
    /// inside every static limit, with a margin above its regularisation error (at most 1e-6
    /// relative). A certificate that the stuck set holds when the minimum-norm split of a
    /// redundant group overloads one element.
    fn weighted_split_inside(&mut self, at: At) -> bool {
        let n = self.net.n_dof;
        let Work { f_st, ud, w_st, f_end, w1, f, w_e, acc, lam_w: lam, caps, xnz, .. } = &mut self.ws;
        let (f, ud, w) = match at {
            At::Stage(i) => (&f_st[i], &ud[i], &w_st[i]),
            At::End => (&*f_end, &ud[2], &*w1),
            At::Dense => (&*f, &ud[3], &*w_e),
        };
        let s = &self.slots[self.cur];
        let np = self.net.rows.len();
        let x = if s.rhs.is_empty() {
            &f[..n]
        } else {
            for k in 0..n {
                acc[k] = f[k] - self.net.mass[k] * ud[k];
            }
            &acc[..n]
        };
        map_columns(&s.tmap_w, s.rstride, nonzeros(x, xnz), &mut lam[..s.r]);
        let mut inside = true;
        for (pos, &i) in s.locked.iter().enumerate() {
            let law = &self.net.friction[i].law;
            if matches!(law, crate::elements::FrictionLaw::Lossy { .. }) {
                inside = false;
                break;
            }
            let (g, limit) = law.hold_excess(caps[i], lam[np + pos], lam, w);
            if g >= -1e-5 * limit.max(1e-300) {
                inside = false;
                break;
            }
        }
        inside
    }

    /// Break-away test of a redundant lock set (two locks on one relative motion) at a sample:
    /// the complementarity problem of the stuck elements is solved with the forces there; the
    /// result is the largest relative acceleration it cannot cancel, minus twice the
    /// classification tolerance (so a located event always releases something).
    fn group_violation(&mut self, at: At, t: f64) -> f64 {
        let nf = self.net.friction.len();
        // Steady signals give every sample of the epoch the same capacities.
        let caps_valid = self.unsteady.is_empty() && self.caps_key == (self.sig_gen, self.epoch);
        match at {
            At::Stage(i) => {
                self.stage_forces();
                self.stage_torques();
                let Work { f, f_st, sig, caps, .. } = &mut self.ws;
                f.copy_from_slice(&f_st[i]);
                if !caps_valid {
                    Self::stuck_capacities(&self.net, &self.modes, &sig[i], caps);
                }
            }
            At::End => {
                self.end_torques();
                let Work { f, f_end, sig_end, caps, .. } = &mut self.ws;
                f.copy_from_slice(f_end);
                if !caps_valid {
                    Self::stuck_capacities(&self.net, &self.modes, sig_end, caps);
                }
            }
            At::Dense => {
                self.fill_signals(2, t, false);
                // Forces (into `f`) and the current mode's constraint torques (into `lam`).
                self.constraint_torques_at_e(t);
                let Work { sig, caps, .. } = &mut self.ws;
                if !caps_valid {
                    Self::stuck_capacities(&self.net, &self.modes, &sig[2], caps);
                }
            }
        }
        self.caps_key = if self.unsteady.is_empty() { (self.sig_gen, self.epoch) } else { (u64::MAX, 0) };
        // The current mode's minimum-norm split is one split: when it is strictly inside every
        // limit, the group holds and the complementarity solve below would say so too.
        {
            let (lam, w) = match at {
                At::Stage(i) => (&self.ws.lam_st[i], &self.ws.w_st[i]),
                At::End => (&self.ws.lam_end, &self.ws.w1),
                At::Dense => (&self.ws.lam, &self.ws.w_e),
            };
            if self.min_norm_inside(lam, w, |i| self.ws.caps[i]) {
                return -1.0;
            }
        }
        // The capacity-weighted split is a second certificate.
        if self.weighted_split_inside(at) {
            return -1.0;
        }
        let base_key = Self::lock_key(&[], &self.kin_engaged) << nf;
        let base = self.slot_for(base_key);
        self.compute_qp(base);
        self.prescribed_in(base, t, 3);
        self.qp_rhs(!self.slots[base].rhs.is_empty(), true);
        let mut k = 0;
        for i in 0..nf {
            if self.modes[i] == FrictionMode::Stuck {
                self.ws.qp_idx[k] = i;
                k += 1;
            }
        }
        if k == 0 {
            return -1.0;
        }
        let eps = self.qp_solve(base, k);
        let mut worst: f64 = 0.0;
        let mut bscale: f64 = 1e-300;
        let mut xmax: f64 = 0.0;
        for a in 0..k {
            let acc: f64 = (0..k)
                .map(|b| (self.ws.qp_w[a * k + b] - if a == b { eps } else { 0.0 }) * self.ws.qp_x[b])
                .sum::<f64>()
                + self.ws.qp_rhs[a];
            worst = worst.max(acc.abs());
            bscale = bscale.max(self.ws.qp_rhs[a].abs());
            xmax = xmax.max(self.ws.qp_x[a].abs());
        }
        // The minimum-norm split leaves each relative acceleration `eps x` short of zero (the
        // Tikhonov term); that is not a violation.
        worst - 2.0 * (1e-9 * bscale + 1e-12 + eps * xmax)
    }

    /// The coupled stick-slip problem for the candidates (see the module docs).
    fn resolve_candidates(&mut self, base: usize) {
        let prescribed = !self.slots[base].rhs.is_empty();
        let nf = self.net.friction.len();
        self.ws.qp_extra.fill(0.0);
        self.qp_rhs(prescribed, false);
        for _round in 0..=nf {
            // Gather the candidate subproblem.
            let mut k = 0;
            for i in 0..nf {
                if self.ws.candidate[i] {
                    self.ws.qp_idx[k] = i;
                    k += 1;
                }
            }
            if k == 0 {
                return;
            }
            let eps = self.qp_solve(base, k);
            // Relative accelerations and break-away.
            let bscale = (0..k).fold(1e-300f64, |s, a| s.max(self.ws.qp_rhs[a].abs()));
            let tol_a = 1e-9 * bscale + 1e-12;
            let mut released = false;
            for a in 0..k {
                let i = self.ws.qp_idx[a];
                let x = self.ws.qp_x[a];
                // A break-away located by the event search: the excess over the static limit is
                // of rounding size here, so the element goes when its torque is at the limit to
                // within 1e-6, whatever side of it rounding put the complementarity solution
                // (the state here is the re-integrated one, not the dense output the search
                // sampled: they differ by about 1e-7 of the limit).
                let at_located_breakaway = self.breaking & (1 << i) != 0
                    && (self.ws.qp_state[a] != 0 || x.abs() >= (1.0 - 1e-6) * self.ws.caps[i].tau_max);
                if self.ws.qp_state[a] == 0 && !at_located_breakaway {
                    continue;
                }
                let acc: f64 = (0..k)
                    .map(|b| (self.ws.qp_w[a * k + b] - if a == b { eps } else { 0.0 }) * self.ws.qp_x[b])
                    .sum::<f64>()
                    + self.ws.qp_rhs[a];
                if acc.abs() > tol_a || at_located_breakaway {
                    // At the bound the acceleration points against the torque's sign.
                    let dir = if acc.abs() > tol_a {
                        acc.signum()
                    } else if self.ws.qp_state[a] != 0 {
                        -(self.ws.qp_state[a] as f64)
                    } else {
                        -x.signum()
                    };
                    self.ws.candidate[i] = false;
                    self.ws.new_modes[i] = if dir > 0.0 { FrictionMode::Forward } else { FrictionMode::Backward };
                    // Kinetic torque at zero slip acts from now on: lambda = -dir tau0.
                    // A lossy gear starts rolling with the loss at its standstill bound.
                    let lam = match &self.net.friction[i].law {
                        crate::elements::FrictionLaw::Lossy { .. } | crate::elements::FrictionLaw::Ramp { .. } => x,
                        _ => -dir * self.ws.caps[i].tau0,
                    };
                    for j in 0..nf {
                        self.ws.qp_b[j] += self.qp_full[j * nf + i] * lam;
                    }
                    self.net.friction[i].row.add_scaled(&mut self.ws.qp_extra, lam);
                    released = true;
                }
            }
            if !released {
                return;
            }
        }
    }

    /// Recomputes telemetry torques at the current state.
    fn update_outputs(&mut self) {
        self.ws.phi_e.copy_from_slice(&self.phi);
        self.ws.w_e.copy_from_slice(&self.w);
        self.fill_signals(2, self.t, false);
        self.constraint_torques_at_e(self.t);
        self.update_torques(false);
    }

    /// Element torques from the constraint torques (`ws.lam_end` at a clean end, else `ws.lam`)
    /// and the signals in `sig[2]`. `at_end`: the state is
    /// the end of an event-free sub-step whose end caches ([`Simulation::end_torques`]) hold
    /// the torque-dependent friction torques and powers.
    #[inline(always)]
    fn update_torques(&mut self, at_end: bool) {
        // Law torques and dissipated powers (a clean end has them from its end forces).
        self.out_power.fill(0.0);
        if at_end {
            for k in 0..self.net.laws.len() {
                let e = self.net.law_element[k];
                self.out_tau[e] = self.ws.law_tau_end[k];
                self.out_power[e] += self.ws.law_diss_end[k];
            }
        } else {
            self.ws.f.fill(0.0);
            for (k, law) in self.net.laws.iter().enumerate() {
                let o = law.eval(&self.phi, &self.w, &self.ws.sig[2], self.regimes[k], &mut self.ws.f, None);
                let e = self.net.law_element[k];
                self.out_tau[e] = o.tau;
                self.out_power[e] += o.dissipation;
            }
        }
        // Sliding torque-dependent elements: a rolling lossy gear's loss power and a slipping
        // pack's torque come from the coupled correction (a clean end has them from its end
        // forces).
        let dependent = self.torque_dependent & self.sliding;
        if dependent != 0 && !at_end {
            let Work { f, sig, fric_power, ls_a, dep_tau, .. } = &mut self.ws;
            Self::forces(
                &self.net,
                &self.modes,
                self.sliding,
                &self.regimes,
                &self.phi,
                &self.w,
                &sig[2],
                f,
                Record::Nothing,
            );
            let s = &self.slots[self.cur];
            Self::torque_dependent_correct(
                &self.net,
                s,
                &self.modes,
                dependent,
                &self.w,
                f,
                ls_a,
                dep_tau,
                Some(&mut fric_power[0]),
            );
            self.ws.cache &= !1;
        }
        // The constraint torques of the active rows at this state.
        let lam = if at_end { &self.ws.lam_end } else { &self.ws.lam };
        // Permanent rows: gears report flange_b.tau (node b receives -ratio lambda =
        // -flange_b.tau), speed sources the torque they apply to their flange.
        for &(ri, e, c) in &self.row_outputs {
            self.out_tau[e] = c * lam[ri];
        }
        // Engaged kinematic clutches carry their constraint torque.
        let s = &self.slots[self.cur];
        for (p, &j) in s.kin.iter().enumerate() {
            let ri = self.net.rows.len() + s.locked.len() + p;
            let kc = &self.net.kinematic[j];
            self.out_tau[kc.element] = -lam[ri];
            // Work rho lambda is delivered to the bodies; its negative is dissipated.
            self.out_power[kc.element] = -self.ws.sig[2][kc.rho_signal] * lam[ri];
        }
        // Friction elements: stuck ones carry their lock's constraint torque, free ones none,
        // sliding ones their kinetic torque (a LossyGear reports the gear's flange_b torque,
        // set above, and its loss power).
        let np = self.net.rows.len();
        for (pos, &i) in s.locked.iter().enumerate() {
            let fe = &self.net.friction[i];
            if self.lossy & 1 << i != 0 {
                self.out_power[fe.element] = 0.0;
            } else {
                self.out_tau[fe.element] = -lam[np + pos];
            }
        }
        // Free elements carry nothing: written when they become free (until then `out_tau`
        // holds their zero), a LossyGear's power at every update.
        let free = self.free;
        for i in bits(free & !self.out_free | free & self.lossy) {
            let fe = &self.net.friction[i];
            if self.lossy & 1 << i != 0 {
                self.out_power[fe.element] = 0.0;
            } else {
                self.out_tau[fe.element] = 0.0;
            }
        }
        self.out_free = free;
        for i in bits(self.sliding) {
            let fe = &self.net.friction[i];
            let lossy = self.lossy & 1 << i != 0;
            let mode = self.modes[i];
            let (tau, power) = if dependent & 1 << i != 0 {
                // The coupled correction's pack torque, or a rolling lossy gear's loss power.
                let (dep_tau, fric_power) = if at_end {
                    (&self.ws.dep_tau_end, &self.ws.fric_power_end)
                } else {
                    (&self.ws.dep_tau, &self.ws.fric_power[0])
                };
                if lossy { (0.0, fric_power[i]) } else { (dep_tau[i], dep_tau[i] * fe.row.dot(&self.w)) }
            } else if at_end {
                // The end forces' torque and power (same operands, same values).
                (self.ws.fric_tau_end[i], self.ws.fric_power_end[i])
            } else {
                let tau = mode.dir() * fe.law.kinetic_torque(&self.ws.sig[2], fe.row.dot(&self.w).abs(), &self.w);
                (tau, tau * fe.row.dot(&self.w))
            };
            if !lossy {
                self.out_tau[fe.element] = tau;
            }
            self.out_power[fe.element] = power;
        }
        // The ledger's kinetic energy is computed when it is read.
        // (Laws that read the signals only store no energy; without the ledger nothing reads it.)
        if self.params.track_energy {
            self.energy.potential = if self.laws_state_free { 0.0 } else { self.potential(2) };
        }
    }
}

/// A slip at or below this is zero (to rounding) among node speeds of scale `w_max` (the
/// largest of them and 1 rad/s, [`speed_scale`]): 1e-12 of it.
fn zero_slip_tolerance(w_max: f64) -> f64 {
    1e-12 * w_max
}

/// The largest of 1 and the speeds `|w|` (the scale of [`zero_slip_tolerance`]).
fn speed_scale(w: &[f64]) -> f64 {
    // (A compare and select, not `f64::max`: the same result here, a NaN speed included,
    // which neither lets through, without `max`'s NaN branches.)
    w.iter().fold(1.0f64, |s, v| if v.abs() > s { v.abs() } else { s })
}

/// True when no value of `x` is infinite or NaN, without branches: `v * 0` is a signed zero
/// for a finite `v` and NaN (an exponent of all ones) otherwise, and the bits are or-ed.
fn all_finite(x: &[f64]) -> bool {
    const EXP: u64 = 0x7ff0_0000_0000_0000;
    x.iter().fold(0, |acc, v| acc | (v * 0.0).to_bits()) & EXP != EXP
}

/// Lagrange weights at `theta` (in units of the sub-step) of the collocation polynomial through
/// the start (`theta = 0`) and the two Gauss stages.
fn lagrange(theta: f64) -> [f64; 3] {
    lagrange3([0.0, C[0], C[1]], theta)
}

/// The Lagrange basis of the quadratic through `nodes`, at `x`.
fn lagrange3(nodes: [f64; 3], x: f64) -> [f64; 3] {
    let [a, b, c] = nodes;
    [
        (x - b) * (x - c) / ((a - b) * (a - c)),
        (x - a) * (x - c) / ((b - a) * (b - c)),
        (x - a) * (x - b) / ((c - a) * (c - b)),
    ]
}

/// What the residual of a Newton correction ([`Correction`]) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Residual {
    /// `R_i = h sum_j a_ij g_j - Mr (Q_i - q0)`.
    Full,
    /// `R_i = h sum_j a_ij g_j`: the stages are at `q0`, or a force change is mapped.
    Forces,
}

/// One simplified Newton correction of the stages of a mode: what it reads.
struct Correction<'a> {
    /// What the residual holds.
    residual: Residual,
    /// Sub-step size, s.
    h: f64,
    /// Reduced inertia `Mr` (`m x m`), reduced stage forces `gq` (`2m`), start `q0` (`m`),
    /// inverse Newton matrix (`2m x 2m`, column-major).
    mr: &'a [f64],
    gq: &'a [f64],
    q0: &'a [f64],
    inv: &'a [f64],
}

impl Correction<'_> {
    /// The residual `R` into `res` (`2m`) and `Q += J^-1 R` into the stages `q` (`2m`) of a
    /// mode with `m` free coordinates. Returns the largest correction and the largest updated
    /// stage value. Small modes (`m <= 6`, every shipped vehicle's) run on loops of constant
    /// length, unrolled; the sums run in the same order either way.
    #[inline]
    fn apply(&self, m: usize, q: &mut [f64], res: &mut [f64]) -> (f64, f64) {
        match m {
            1 => self.apply_in(1, q, res),
            2 => self.apply_in(2, q, res),
            3 => self.apply_in(3, q, res),
            4 => self.apply_in(4, q, res),
            5 => self.apply_in(5, q, res),
            6 => self.apply_in(6, q, res),
            _ => self.apply_in(m, q, res),
        }
    }

    /// [`Correction::apply`], inlined where `m` is a constant.
    #[inline(always)]
    fn apply_in(&self, m: usize, q: &mut [f64], res: &mut [f64]) -> (f64, f64) {
        let (h, mm) = (self.h, 2 * m);
        let (mr, gq, q0, inv) = (&self.mr[..m * m], &self.gq[..mm], &self.q0[..m], &self.inv[..mm * mm]);
        let (q, res) = (&mut q[..mm], &mut res[..mm]);
        for i in 0..2 {
            let (ha0, ha1) = (h * A[i][0], h * A[i][1]);
            for a in 0..m {
                let f = ha0 * gq[a] + ha1 * gq[m + a];
                res[i * m + a] = match self.residual {
                    Residual::Forces => f,
                    Residual::Full => {
                        let qi = &q[i * m..(i + 1) * m];
                        let mq: f64 = mr[a * m..(a + 1) * m]
                            .iter()
                            .zip(qi.iter().zip(q0))
                            .map(|(mr, (q, q0))| mr * (q - q0))
                            .sum();
                        f - mq
                    }
                };
            }
        }
        let (mut norm_dq, mut norm_q) = (0.0f64, 0.0f64);
        let mut update = |k: usize, dq: f64| {
            q[k] += dq;
            norm_dq = norm_dq.max(dq.abs());
            norm_q = norm_q.max(q[k].abs());
        };
        // `dq_k = sum_j inv_kj res_j`, each summed over ascending `j` from -0.0 (as
        // `Iterator::sum` adds). Small modes run the columns with all `2m` sums at once: the
        // sums are independent, so they overlap instead of each waiting on its last addition.
        const LANES: usize = 12;
        if mm <= LANES && mm > 0 {
            let mut acc = [-0.0f64; LANES];
            let acc = &mut acc[..mm];
            for (col, &r) in inv.chunks_exact(mm).zip(res.iter()) {
                for (a, c) in acc.iter_mut().zip(col) {
                    *a += c * r;
                }
            }
            for (k, &dq) in acc.iter().enumerate() {
                update(k, dq);
            }
        } else {
            for k in 0..mm {
                update(k, (0..mm).map(|j| inv[j * mm + k] * res[j]).sum());
            }
        }
        (norm_dq, norm_q)
    }
}

/// `out[a] = sum_i cols[i w + a] x[i]` for every `a < out.len()`, where `cols` holds a
/// matrix by columns (`x.len()` of them, `w` apart): `linalg::dot` of each row with `x`, bit
/// for bit (each sum from -0.0 over ascending `i`, each product the row entry times `x[i]`),
/// all rows at once so that the independent sums overlap.
fn columns_dot(cols: &[f64], w: usize, x: &[f64], out: &mut [f64]) {
    out.fill(-0.0);
    for (col, &xi) in cols.chunks_exact(w.max(1)).zip(x) {
        for (o, &c) in out.iter_mut().zip(col) {
            *o += c * xi;
        }
    }
}

/// Gathers the non-zero entries of `x` into `nz` as `(index, value)`, ascending, and returns
/// them. Most nodes of a driveline carry no applied torque (gear members, locked shafts), so
/// the constraint-torque maps run over these only.
#[inline]
fn nonzeros<'a>(x: &[f64], nz: &'a mut [(u32, f64)]) -> &'a [(u32, f64)] {
    // Every entry is written and only the non-zeros advance (no branch to mispredict).
    let mut k = 0;
    for (i, &v) in x.iter().enumerate() {
        nz[k] = (i as u32, v);
        k += usize::from(v != 0.0);
    }
    &nz[..k]
}

/// `out = map x` for a column-major `map` (column `k` at `k * stride`, `out.len()` rows), from
/// the non-zeros of `x` ([`nonzeros`]): each row sums in ascending columns from +0.0.
#[inline]
fn map_columns(map: &[f64], stride: usize, xnz: &[(u32, f64)], out: &mut [f64]) {
    map_columns_from(map, stride, xnz, 0, out);
}

/// [`map_columns`] for the rows `first..first + out.len()` of the map only.
#[inline]
fn map_columns_from(map: &[f64], stride: usize, xnz: &[(u32, f64)], first: usize, out: &mut [f64]) {
    map_columns_in::<false>(map, stride, xnz, first, out);
}

/// `out += map x` over the rows `first..first + out.len()`, as [`map_columns_from`] forms its
/// sums but starting from `out`'s values.
#[inline]
fn map_columns_onto(map: &[f64], stride: usize, xnz: &[(u32, f64)], first: usize, out: &mut [f64]) {
    map_columns_in::<true>(map, stride, xnz, first, out);
}

/// [`map_columns_from`] (`ONTO` false: the sums start from +0.0) or [`map_columns_onto`].
#[inline]
fn map_columns_in<const ONTO: bool>(map: &[f64], stride: usize, xnz: &[(u32, f64)], first: usize, out: &mut [f64]) {
    // Up to sixteen rows in registers, in whole lanes of four: the entries of a column past the
    // last row (the next column's, or the map's padding) are formed and dropped.
    match out.len() {
        1..=4 => return map_lanes::<4, ONTO>(map, stride, xnz, first, out),
        5..=8 => return map_lanes::<8, ONTO>(map, stride, xnz, first, out),
        9..=12 => return map_lanes::<12, ONTO>(map, stride, xnz, first, out),
        13..=16 => return map_lanes::<16, ONTO>(map, stride, xnz, first, out),
        _ => {}
    }
    if !ONTO {
        out.fill(0.0);
    }
    let r = out.len();
    for &(k, v) in xnz {
        let at = k as usize * stride + first;
        let col = &map[at..at + r];
        for (o, c) in out.iter_mut().zip(col) {
            *o += c * v;
        }
    }
}

/// Entries past the last column of a column-major map, so that [`map_lanes`] may read up to
/// three entries past any column's rows (its lanes round a row count up to a multiple of four).
const MAP_PAD: usize = 3;

/// [`map_columns_in`] with its `out.len() <= R` rows in `R` accumulators: each row sums the
/// same terms in the same order from +0.0 or (`ONTO`) from its value in `out`.
#[inline]
fn map_lanes<const R: usize, const ONTO: bool>(
    map: &[f64],
    stride: usize,
    xnz: &[(u32, f64)],
    first: usize,
    out: &mut [f64],
) {
    let mut acc = [0.0; R];
    if ONTO {
        acc[..out.len()].copy_from_slice(out);
    }
    for &(k, v) in xnz {
        let at = k as usize * stride + first;
        let col = &map[at..at + R];
        for j in 0..R {
            acc[j] += col[j] * v;
        }
    }
    out.copy_from_slice(&acc[..out.len()]);
}

/// Bit `i` set for each sliding (Forward or Backward) element `i` of `modes`.
fn sliding_mask(modes: &[FrictionMode]) -> u64 {
    mask_where(modes, |m| matches!(m, FrictionMode::Forward | FrictionMode::Backward))
}

/// Bit `i` set for each item `i` of `items` (at most 64) that satisfies `pred`.
fn mask_where<T>(items: &[T], pred: impl Fn(&T) -> bool) -> u64 {
    items.iter().enumerate().fold(0, |m, (i, x)| if pred(x) { m | 1 << i } else { m })
}

/// The mask of the first `n` (at most 64) elements.
fn low_bits(n: usize) -> u64 {
    if n == 0 { 0 } else { u64::MAX >> (64 - n) }
}

/// The indices of the set bits of `mask`, ascending.
#[inline]
fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let i = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        Some(i)
    })
}

/// [`Simulation::forces_in`] kinds: no record, [`Record::Powers`], [`Record::Torques`].
const NO_RECORD: u8 = 0;
const POWERS: u8 = 1;
const TORQUES: u8 = 2;

/// What a force evaluation records per element besides the nodal forces. The friction
/// records hold the sliding elements' entries only (the others keep stale values nobody reads).
enum Record<'a> {
    Nothing,
    /// Stage records: law power, law dissipation, friction dissipation (the energy ledger),
    /// friction torque (the stage predictor's input steps).
    Powers(&'a mut [f64], &'a mut [f64], &'a mut [f64], &'a mut [f64]),
    /// Telemetry at a sub-step end: law torque, law dissipation, friction torque, friction
    /// dissipation.
    Torques(&'a mut [f64], &'a mut [f64], &'a mut [f64], &'a mut [f64]),
}

/// Source of a prescribed row's right-hand side.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rhs {
    /// A speed or position source (does work: input).
    Source(crate::network::Prescribed),
    /// An engaging kinematic clutch, ramp signal index (takes work out: dissipated).
    Clutch(usize),
}

impl Rhs {
    fn rate(&self, signals: &[Signal], t: f64) -> (f64, f64) {
        match *self {
            Rhs::Source(p) => p.rate(signals, t),
            Rhs::Clutch(k) => (signals[k].eval(t), signals[k].derivative(t)),
        }
    }
}

/// Where an event function is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Stage(usize),
    End,
    Dense,
}

/// Event function kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Slip(usize),
    Engage(usize),
    Release(usize),
    Breakaway(usize),
    /// Break-away of a redundant lock set, as a whole.
    Group,
    Regime(usize),
}

fn row_coef(row: &crate::elements::Row, k: usize) -> f64 {
    row.entries.iter().filter(|e| e.0 == k && e.1 != 0.0).map(|e| e.1).sum()
}

/// Why a run-time input was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    /// No input of that name.
    #[error("no input named '{0}' in this network")]
    Unknown(String),
    /// NaN or infinite.
    #[error("input '{name}' = {value} refused: inputs must be finite")]
    NotFinite {
        /// Input name.
        name: String,
        /// The refused value.
        value: f64,
    },
}

/// Why a step was refused.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum StepError {
    /// The step size is not a positive finite number.
    #[error("step size {0} s is not a positive finite number")]
    BadStep(f64),
    /// The step produced a non-finite state (for example from a NaN signal value); the state
    /// was restored to the step start at this time, s.
    #[error("the step from t = {0} s produced a non-finite state; the state was restored to that time")]
    NonFinite(f64),
}

/// Convex box-constrained QP `min 1/2 x^T W x + b^T x, lo <= x <= hi` by a primal active-set
/// method (exact, finite). `W` must be symmetric positive definite (the caller regularises).
/// `state[i]`: 0 free, -1 at lo, +1 at hi. `fact`/`piv` hold the LU factors of the free
/// block with free mask `factored` (`u64::MAX`: none); they are reused while the free set is
/// that one, and left holding the last factorisation.
#[allow(clippy::too_many_arguments)]
fn box_qp(
    k: usize,
    w: &[f64],
    b: &[f64],
    lo: &[f64],
    hi: &[f64],
    x: &mut [f64],
    state: &mut [i8],
    fact: &mut [f64],
    piv: &mut [usize],
    factored: &mut u64,
    tmp: &mut [f64],
    warm: bool,
) {
    for i in 0..k {
        if warm {
            // Start from the given point and active set, made feasible.
            match state[i] {
                1 if hi[i].is_finite() => x[i] = hi[i],
                -1 if lo[i].is_finite() => x[i] = lo[i],
                _ => {
                    state[i] = 0;
                    x[i] = x[i].clamp(lo[i], hi[i]);
                }
            }
        } else {
            x[i] = 0.0f64.clamp(lo[i], hi[i]);
            state[i] = 0;
        }
        if lo[i] == hi[i] {
            x[i] = lo[i];
            state[i] = -1;
        }
    }
    for _ in 0..(8 * k + 16) {
        // Solve the free subproblem: W_FF y_F = -(b_F + W_FB x_B).
        let mut nfree = 0;
        let mut idx = [0usize; 64];
        let mut free_mask = 0u64;
        for i in 0..k {
            if state[i] == 0 {
                idx[nfree] = i;
                nfree += 1;
                free_mask |= 1 << i;
            }
        }
        for a in 0..nfree {
            let ia = idx[a];
            let mut r = -b[ia];
            for j in 0..k {
                if state[j] != 0 {
                    r -= w[ia * k + j] * x[j];
                }
            }
            tmp[a] = r;
        }
        if nfree > 0 && *factored != free_mask {
            for a in 0..nfree {
                for c in 0..nfree {
                    fact[a * nfree + c] = w[idx[a] * k + idx[c]];
                }
            }
            *factored = if linalg::lu_factor(fact, nfree, piv).is_ok() { free_mask } else { u64::MAX };
        }
        if nfree > 0 && *factored == free_mask {
            linalg::lu_solve(fact, nfree, piv, tmp);
        }
        // Step towards the subspace minimiser, stopping at the first bound.
        let mut alpha = 1.0;
        let mut block = usize::MAX;
        for a in 0..nfree {
            let i = idx[a];
            let target = tmp[a];
            let d = target - x[i];
            if target > hi[i] && d > 0.0 {
                let al = (hi[i] - x[i]) / d;
                if al < alpha {
                    alpha = al;
                    block = i;
                }
            } else if target < lo[i] && d < 0.0 {
                let al = (lo[i] - x[i]) / d;
                if al < alpha {
                    alpha = al;
                    block = i;
                }
            }
        }
        for a in 0..nfree {
            let i = idx[a];
            x[i] += alpha * (tmp[a] - x[i]);
        }
        if block != usize::MAX {
            let i = block;
            if (x[i] - hi[i]).abs() <= (x[i] - lo[i]).abs() {
                x[i] = hi[i];
                state[i] = 1;
            } else {
                x[i] = lo[i];
                state[i] = -1;
            }
            continue;
        }
        // Optimal on this face: check the multipliers of the bound variables.
        let mut worst = 0.0;
        let mut wi = usize::MAX;
        for i in 0..k {
            if state[i] == 0 || lo[i] == hi[i] {
                continue;
            }
            let g: f64 = (0..k).map(|j| w[i * k + j] * x[j]).sum::<f64>() + b[i];
            // At lo the gradient must be >= 0, at hi <= 0.
            let viol = if state[i] < 0 { -g } else { g };
            if viol > worst {
                worst = viol;
                wi = i;
            }
        }
        if wi == usize::MAX || worst <= 1e-14 * (1.0 + b.iter().take(k).fold(0.0f64, |s, v| s.max(v.abs()))) {
            return;
        }
        state[wi] = 0;
    }
}

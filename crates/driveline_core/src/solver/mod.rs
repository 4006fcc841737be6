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
//!    **Events that coincide are one event.** The slips located within the localisation
//!    tolerance of the earliest one go together, and so does every other sliding element whose
//!    slip is at zero (to `1e-12` of the largest speed) or reversed in the state the recomputed
//!    sub-step reaches: it crossed zero with the located one. Two drives under one excitation lock
//!    within a picosecond of each other, yet their roots on the polynomial may lie farther apart
//!    than the tolerance, and the recomputed sub-step lands between them. Each such element is
//!    then a stuck candidate of the same mode selection. It is never taken through the opposite
//!    sliding mode for a moment first. `tests/coinciding_events.rs` checks the same mode sequence
//!    at every step from 1e-4 s to 1/30 s.
//!
//! # When a sub-step goes wrong
//! - A step longer than [`Simulation::max_step`] is taken in equal pieces: 0.05 s
//!   ([`IntegrationParameters::max_step`]), or [`MAX_STEP_TURN`] (2 pi) over the network's
//!   fastest linear rate ([`Simulation::fastest_rate`]) when that is shorter, so that the two
//!   Gauss stages sample the fastest oscillation at least at the Nyquist rate, but never less
//!   than 1 ms ([`MIN_OWN_MAX_STEP`]). (The 350Z, at
//!   about 470 /s, is taken in 13 ms pieces; the diesel truck, at 650 /s, in 9.7 ms pieces; a
//!   60 Hz frame is two pieces for them, one for the other shipped vehicles.)
//! - A simplified Newton iteration whose correction grows on a freshly taken Jacobian (a
//!   law whose slope at the sub-step start is far from its slope at the motion, such as a
//!   quadratic drag at rest) goes back one iterate and continues as a damped Newton iteration
//!   with a Jacobian at each iterate (Deuflhard's natural monotonicity test).
//! - A Newton iteration that does not converge (or diverges) is never committed: its sub-step is
//!   cut to a quarter, up to 24 times, and the sub-steps after it grow back by four each. A
//!   sub-step that converges on no cut refuses the step ([`StepError::NotConverged`]).
//! - Events at one instant that keep forcing the same elements (a selection the motion
//!   contradicts at once) are broken after a few repeats: the sliding direction is flipped,
//!   then the element held; a redundant lock group, or a lock, whose break-away test fires at
//!   its own instant while the complementarity solve keeps it stuck is trusted for the rest
//!   of the step.
//! - A step whose events use up `max_substeps` finishes through the Zeno guard, without event
//!   location, in sub-steps that grow by four from the last converged one (cut the same way),
//!   at most 4096 of them; each ends with a mode selection for every sliding element whose
//!   slip is no longer ahead of its direction (a friction kept sliding past zero would drive
//!   the motion). A correction that grows on a kept Jacobian goes back one iterate to a fresh
//!   one; a damped iteration that fails leaves no Jacobian behind.
//! - A step that still ends non-finite is refused: the state goes back to the step start and a
//!   [`StepError`] names the bodies (`NonFinite`, or `Singular` when a matrix was singular).
//! - The null space of a mode's constraints eliminates the lightest coordinates first, so that
//!   the reduced inertia holds each light body on its own diagonal entry (a light body as the
//!   small difference of a heavy body's projected entries sets a rounding floor on Newton's
//!   corrections).
//!
//! # The modules, in the order of a step
//! | module | what it holds |
//! |---|---|
//! | `params`, `report` | the solver's parameters; what a step reports (modes, events, counters, the energy ledger, errors) |
//! | `setup` | building a simulation: the [`Network`] and what is derived from it once (`Derived`, shared through the library), and the simulation's own signals (`Model`), kept apart from the per-simulation state |
//! | `work` | the workspaces a step writes and reads back within itself, sized once |
//! | `signals` | the signal cache: signal values at the stages and the end, evaluated once per change |
//! | `inputs` | run-time inputs, and the force steps they make for the start-of-step lock test and the predictor |
//! | `compile` | mode compilation: null space, reduced inertia, constraint-torque maps, cached per lock pattern |
//! | `library` | the network, what is derived from it and its compiled modes, shared by every simulation of an equal network |
//! | `forces` | element torques at the stages and the end, constraint torques, Jacobians |
//! | `collocation`, `predictor` | the Gauss stage solve (Newton factors, stage guess, Newton, end values) and where Newton starts |
//! | `events` | event detection and location on the collocation polynomial |
//! | `modes`, `box_qp` | mode selection: the coupled complementarity problem (a box QP, a pure function) and the tests that skip it |
//! | `edit` | edits between steps: parameters updated in place, written state |
//! | `fastest` | the network's fastest linear rate and the longest step it takes in one piece |
//! | `step` | one step: sub-steps between events, the time-only kernel, the step's end |
//! | `outputs` | element torques, speeds and modes, and the energy ledger, read after a step |
//! | `thermal` | the thermal network's step after each mechanical step, and its readings |
//! | `accel` | the accelerations at a step's end, for the acceleration sensors |
//! | `time_only`, `lanes`, `support` | the time-only kernel; dense kernels; small helpers |
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
//! Through a shift the first correction then lands near the tolerance instead of orders of
//! magnitude above it, and Newton needs fewer iterations (docs/performance.md has the figures).
//! Only the start changes: the converged stages are the same to the Newton tolerance
//! ([`IntegrationParameters::newton_start`] chooses, for comparison).
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
//! (Newton's linear range). A shift then mostly takes one iteration a step, with the same shifts
//! and events (vehicle drives agree to the tolerance except where a 1e-10 difference tips a
//! controller's threshold by a step).
//!
//! # Memory
//! A simulation's mode cache (`IntegrationParameters::mode_cache_slots` slots, least recently
//! used replaced) holds, per slot, a handle on a compiled mode and what is this simulation's
//! own: the locked elements' limits it asked for, the mode's Jacobian and Newton factors.
//! The compiled modes themselves (the null space, the reduced inertia and its factors, the
//! constraint-torque maps: three quarters of a slot) live in a library shared by every
//! simulation of an equal network, found by the network's description (input values aside).
//! A fleet spawned from one file compiles each mode once and holds one copy of it. Sharing
//! changes no result: a compiled mode is a pure function of the network, the lock pattern and,
//! for a redundant mode, the limits it weighs by, and it is compiled into a cleared entry
//! whichever simulation asks first ([`Simulation::shares_compiled_modes_with`]).
//!
//! # Ambiguous locks
//! Two friction elements that lock the same relative motion (the Modelica Rotational
//! library's "Requirements for simulation tools") make the stuck torques non-unique. The solver takes the **minimum-norm split** (the limit of a Tikhonov
//! regularisation of the complementarity problem), so two equal clutches in parallel share the
//! torque equally. An element breaks away when no split within all static limits exists.

use crate::Signal;
use crate::elements::{Capacity, Jacobian, Law, LawState, Row};
use crate::linalg;
use crate::network::Network;
use std::sync::Arc;

mod accel;
mod box_qp;
mod collocation;
mod compile;
mod edit;
mod events;
mod fastest;
mod forces;
mod inputs;
mod lanes;
mod library;
mod modes;
mod outputs;
mod params;
mod persist;
mod predictor;
mod report;
mod setup;
mod signals;
mod step;
mod support;
mod thermal;
mod time_only;
mod work;

use box_qp::*;
use collocation::*;
use compile::*;
use events::*;
use forces::*;
use inputs::*;
use lanes::*;
use library::ModeShape;
use modes::*;
use outputs::*;
use predictor::*;
use setup::*;
use signals::*;
use support::*;
use work::*;

pub use edit::{Follow, StateAdjustment, StateWrite, StateWriteError, UpdateError};
pub use fastest::{MAX_STEP_TURN, MIN_OWN_MAX_STEP};
pub use inputs::InputId;
pub use outputs::{CouplingReading, ElementOutputs, RelativeOutputs};
pub use params::{IntegrationParameters, NewtonStart};
pub use report::{EnergyLedger, FrictionMode, InputError, InputRejected, ModeEvent, StepError, StepStats};
pub use thermal::ThermalLedger;

/// A running simulation of one [`Network`].
#[derive(Debug, Clone)]
pub struct Simulation {
    // What the simulation runs: fixed once it is built.
    /// The network and what is derived from it once. Only the values of the run-time inputs
    /// ([`Signal::Input`], set through [`Simulation::set_input`]) change in it while the
    /// simulation runs.
    model: Model,
    /// The solver's parameters.
    params: IntegrationParameters,

    // The state a step starts from.
    /// Time, s.
    t: f64,
    /// Node angles, rad (m for translational nodes), and speeds, rad/s (m/s).
    phi: Vec<f64>,
    w: Vec<f64>,
    /// Each friction element's mode and each law's regime (backlash contact, elastic clutch).
    modes: Vec<FrictionMode>,
    regimes: Vec<LawState>,
    /// Kinematic clutches: engaged (row active), and the mode they report.
    kin_engaged: Vec<bool>,
    kin_modes: Vec<FrictionMode>,
    /// The first step has run (the initial mode selection is made).
    started: bool,
    /// The next time event (a signal's step, corner or edge) after `t`, s.
    next_time_event: f64,

    // The compiled modes.
    /// The mode cache: compiled modes, slot 0 the base mode (no lock), the others reused by
    /// least recent use.
    slots: Vec<ModeSlot>,
    /// The slot of the current mode.
    cur: usize,
    /// The Jacobians and Newton factors the slots borrow.
    newton: NewtonPool,
    /// Counts slot look-ups: the age stamp of the least-recently-used replacement.
    clock: u64,
    /// Bumped at every mode selection (modes, regimes or the state may switch there): the
    /// stage predictor, the reused Jacobians of nonlinear modes and the cached group
    /// capacities are valid within one epoch.
    epoch: u64,
    /// The time-only kernel of the current mode ([`time_only`]).
    kernel: time_only::TimeOnly,

    // Caches and records that make steps cheap; none changes a result.
    /// Which signals vary and how, and what the signal buffers hold.
    signals: SignalCache,
    /// The inputs that stepped since the last step and the force changes they make.
    inputs: InputSteps,
    /// The friction elements by what they do now, as masks.
    friction: FrictionSets,
    /// What the capacities held in the workspace are valid for.
    capacities: CapacityCache,
    /// The mode whose complementarity data (under the base constraints) the last mode
    /// selection with candidates used: the base slot's, held until the base changes.
    qp: Arc<CompiledMode>,
    /// The last committed sub-step, where the next one's Newton iteration starts.
    pred: Predictor,
    /// The buffers a sub-step leaves for the next one.
    ws: Work,
    /// The thread's scratch while a step runs, an empty placeholder between steps
    /// ([`Simulation::take_scratch`]).
    sc: Box<Scratch>,
    /// The shape of scratch this simulation borrows.
    scratch_shape: ScratchShape,
    /// The lending of the scratch this simulation had last.
    lease: ScratchLease,

    // What a step reports.
    /// Mode changes located so far.
    events: CapVec<ModeEvent>,
    /// Counters.
    stats: StepStats,
    /// The energy ledger.
    energy: EnergyLedger,
    /// Per element: torque at the last step end, N m (N).
    out_tau: Vec<f64>,
    /// Power each element dissipates at the last step end, W.
    out_power: Vec<f64>,
    /// The thermal network's state, when the network has one.
    thermal: Option<Box<thermal::Thermal>>,
    /// The end accelerations, when the network has an acceleration sensor.
    accel: Option<Box<accel::Accelerations>>,
}

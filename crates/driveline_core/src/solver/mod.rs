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

mod box_qp;
mod collocation;
mod compile;
mod events;
mod forces;
mod inputs;
mod lanes;
mod modes;
mod outputs;
mod params;
mod predictor;
mod report;
mod setup;
mod signals;
mod step;
mod support;
mod time_only;
mod work;

use box_qp::*;
use collocation::*;
use compile::*;
use events::*;
use forces::*;
use inputs::*;
use lanes::*;
use outputs::*;
use signals::*;
use support::*;
use work::*;

pub use inputs::InputId;
pub use params::{IntegrationParameters, NewtonStart};
pub use report::{EnergyLedger, FrictionMode, InputError, ModeEvent, StepError, StepStats};

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
    /// How far `input_changes` holds this step's record.
    input_changes_ready: ChangeRecord,
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
    held_in: BufferSet,
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

//! The network description: named elements with their parameters, and the connections between
//! their flanges. This is what scenario files deserialise into and what the Bevy plugin gathers
//! from entities; [`crate::Network::build`] turns it into something the solver can step.

use crate::{ConverterSpec, MagicFormula, Signal, Table1D, TorqueMapSpec};
use serde::{Deserialize, Serialize};

mod kinds;

fn zero() -> f64 {
    0.0
}
fn one() -> f64 {
    1.0
}
fn default_mu() -> Table1D {
    Table1D::constant(0.5)
}
fn default_tau_pos() -> Table1D {
    Table1D::constant(1.0)
}
fn ideal_loss() -> Vec<[f64; 5]> {
    vec![[0.0, 1.0, 1.0, 0.0, 0.0]]
}
fn yes() -> bool {
    true
}
fn room() -> f64 {
    293.15
}
fn default_v_low() -> f64 {
    1.0
}

/// A named element of a network. Flanges are addressed as `"name.flange"` in connections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElementSpec {
    /// Unique name (the MSL instance name in the example scenarios).
    pub name: String,
    /// What the element is, with its parameters.
    pub kind: ElementKind,
}

/// Every element the core solver knows, with its parameters (SI units).
///
/// Sign conventions follow `Modelica.Mechanics.Rotational` (see the crate docs, "Concepts"):
/// for two-flange elements `phi_rel = phi_b - phi_a`, the a-side body receives `+tau` and the
/// b-side body `-tau`. Elements with a support measure their angle relative to the support;
/// `use_support = false` fixes the support to the ground.
///
/// Initial values named `*_start` are *fixed* start values (MSL `fixed = true`); leave them out
/// where they follow from the others. Initialisation fails with a clear message when the given
/// values do not determine every coordinate or contradict each other.
#[allow(non_snake_case)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum ElementKind {
    /// Rotating mass. Flanges `flange_a`, `flange_b` (rigidly joined).
    /// `J a = flange_a.tau + flange_b.tau`.
    Inertia {
        /// Moment of inertia, kg m^2 (>= 0; 0 makes a massless junction).
        /// Plausible range: 0, or 1e-12 .. 1e4 kg m^2.
        J: f64,
        /// Fixed initial angle, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_start: Option<f64>,
        /// Fixed initial speed, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_start: Option<f64>,
    },
    /// Housing: flange `flange` held at angle `phi0`.
    Fixed {
        /// Fixed angle, rad. Default 0.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default = "zero")]
        phi0: f64,
    },
    /// Torque source driven by a signal. Flanges `flange`, `support`.
    /// `flange.tau = -tau`: a positive signal accelerates the flange forwards.
    Torque {
        /// Torque signal, N m.
        tau: Signal,
        /// True: the reaction goes into `support`. False: into the ground. Default false.
        #[serde(default)]
        use_support: bool,
    },
    /// Speed source: the flange turns at `w_ref(t)` relative to the support (MSL `Speed` with
    /// `exact = true`); the torque it takes is whatever that needs. Flanges `flange`, `support`.
    Speed {
        /// Reference speed signal, rad/s (its time derivative is used for the acceleration).
        w_ref: Signal,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
        /// Fixed initial angle of the flange relative to the support, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_start: Option<f64>,
    },
    /// Position source: the flange follows `phi_ref(t)` relative to the support (MSL `Position`
    /// with `exact = true`; speed and acceleration are the signal's first and second
    /// derivatives). Flanges `flange`, `support`.
    Position {
        /// Reference angle signal, rad (twice differentiable between its time events).
        phi_ref: Signal,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Kinematic (functional) clutch of Michael Tiller's "Clutch Modeling - Part II: Kinematic
    /// Clutches" between `flange_a` and `flange_b`. Commanded by
    /// a Boolean signal (`> 0.5` engage): engaging prescribes the relative speed to fall linearly
    /// to zero over `shift_time` (whatever torque that takes), engaged holds it at zero,
    /// disengaging ramps the last torque down to zero over `shift_time`. Modes: Engaged 0,
    /// Engaging +-1 (direction of the slip), Disengaging/Disengaged 2.
    KinematicClutch {
        /// Engage command signal (`> 0.5` is true).
        command: Signal,
        /// Engagement and release duration, s (> 0).
        /// Plausible range: 1e-6 .. 1000 s.
        shift_time: f64,
    },
    /// Constant torque `tau_constant` (N m), same sign rule as [`ElementKind::Torque`].
    ConstantTorque {
        /// Torque, N m.
        /// Plausible range: -1e6 .. 1e6 N m.
        tau_constant: f64,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// `tau = offset_torque + (t < start_time ? 0 : step_torque)`, same sign rule as `Torque`.
    TorqueStep {
        /// Step height, N m.
        /// Plausible range: -1e6 .. 1e6 N m.
        step_torque: f64,
        /// Torque before the step, N m. Default 0.
        /// Plausible range: -1e6 .. 1e6 N m.
        #[serde(default = "zero")]
        offset_torque: f64,
        /// Step time, s. Default 0.
        /// Plausible range: -1e9 .. 1e9 s.
        #[serde(default = "zero")]
        start_time: f64,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Speed-dependent load: `tau = tau_nominal (w/w_nominal)^2` (TorqueDirection = true) or
    /// `tau_nominal sign(w) (w/w_nominal)^2` (false); negative `tau_nominal` brakes.
    QuadraticSpeedDependentTorque {
        /// Torque at the nominal speed, N m.
        /// Plausible range: -1e6 .. 1e6 N m.
        tau_nominal: f64,
        /// Nominal speed, rad/s (> 0).
        /// Plausible range: 1e-3 .. 1e4 rad/s.
        w_nominal: f64,
        /// True: same direction for both signs of w. Default true.
        #[serde(default = "yes")]
        torque_direction: bool,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Speed-dependent load linear in speed (MSL `LinearSpeedDependentTorque`):
    /// `tau = tau_nominal |w/w_nominal|` (TorqueDirection = true) or `tau_nominal w/w_nominal`
    /// (false), with `w` the flange's speed relative to the support and the sign rule of
    /// [`ElementKind::Torque`]; negative `tau_nominal` brakes.
    LinearSpeedDependentTorque {
        /// Torque at the nominal speed, N m.
        /// Plausible range: -1e6 .. 1e6 N m.
        tau_nominal: f64,
        /// Nominal speed, rad/s (> 0).
        /// Plausible range: 1e-3 .. 1e4 rad/s.
        w_nominal: f64,
        /// True: same direction for both signs of w. Default true.
        #[serde(default = "yes")]
        torque_direction: bool,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Speed-dependent torque inverse to speed, a constant power `tau_nominal w_nominal` (MSL
    /// `InverseSpeedDependentTorque`): `tau = tau_nominal w_nominal / |w|` for `|w| > w0`
    /// (TorqueDirection = true; `w` in place of `|w|` when false); below `w0` it is held at
    /// `tau_nominal w_nominal / w0` (true) or goes linearly through zero,
    /// `tau_nominal w_nominal w / w0^2` (false). Sign rule of [`ElementKind::Torque`].
    InverseSpeedDependentTorque {
        /// Torque at the nominal speed, N m.
        /// Plausible range: -1e6 .. 1e6 N m.
        tau_nominal: f64,
        /// Nominal speed, rad/s (> 0).
        /// Plausible range: 1e-3 .. 1e4 rad/s.
        w_nominal: f64,
        /// Speed below which the torque is regularised, rad/s (> 0). Default 1.
        /// Plausible range: 1e-6 .. 1e4 rad/s.
        #[serde(default = "one")]
        w0: f64,
        /// True: same direction for both signs of w. Default true.
        #[serde(default = "yes")]
        torque_direction: bool,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Constant torque whose sign follows the speed (MSL `SignTorque`):
    /// `tau = tau_nominal s(w)`, `s` a regularised `sign(w)` reaching +-1 at `|w| = w0`
    /// ([`Regularization`]); negative `tau_nominal` is a Coulomb-like load. Sign rule of
    /// [`ElementKind::Torque`].
    SignTorque {
        /// Torque magnitude, N m (MSL 4.0's name; MSL 3.2's `tau_constant` is read too).
        /// Plausible range: -1e6 .. 1e6 N m.
        #[serde(alias = "tau_constant")]
        tau_nominal: f64,
        /// Regularisation speed, rad/s (> 0). Default 1.
        /// Plausible range: 1e-6 .. 1e4 rad/s.
        #[serde(default = "one")]
        w0: f64,
        /// Shape of the regularisation. Default `Exp`.
        #[serde(default)]
        reg: Regularization,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Eddy current brake (MSL `EddyCurrentTorque`, Kloss' equation):
    /// `tau = 2 tau_nominal wn / (1 + wn^2)`, `wn = w / (w_nominal (1 + alpha20 (T - TRef)))`, with
    /// `w` the flange's speed relative to the support and `T` the temperature of the heat port
    /// (or the operating temperature `T` when `heatPort` is not connected); the factor
    /// `1 + alpha20 (T - TRef)` is held at 1e-6 or more (a negative `tau_nominal` drives instead
    /// of braking and draws heat, which can cool the disc past that). The opposite sign
    /// rule of [`ElementKind::Torque`]: a positive `tau` *brakes* the flange
    /// (`flange.tau = tau`); `lossPower = tau w >= 0` goes to `heatPort`.
    /// Flanges `flange`, `support`; heat port `heatPort`.
    EddyCurrentTorque {
        /// Maximum braking torque, N m, reached at `w = w_nominal` (MSL `tau_nominal`, or its
        /// `tau_input` with `useTau_nominalInput`): a signal.
        tau_nominal: Signal,
        /// Speed of the maximum torque at the reference temperature, rad/s (> 0).
        /// Plausible range: 1e-3 .. 1e4 rad/s.
        w_nominal: f64,
        /// Reference temperature, K (> 0). Default 293.15.
        /// Plausible range: 1 .. 1e4 K.
        #[serde(default = "room")]
        TRef: f64,
        /// Linear temperature coefficient of the disc's resistance at 20 degC, 1/K. Default 0
        /// (copper: 3.92e-3).
        /// Plausible range: -1e-1 .. 1e-1 1/K.
        #[serde(default)]
        alpha20: f64,
        /// Operating temperature when `heatPort` is not connected, K (> 0). Default 293.15.
        /// Plausible range: 1 .. 1e4 K.
        #[serde(default = "room")]
        T: f64,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Torque from a signal acting between two flanges (MSL `Torque2`): `flange_a.tau = tau`,
    /// `flange_b.tau = -tau`: a positive signal accelerates `flange_b` forwards and `flange_a`
    /// backwards. Flanges `flange_a`, `flange_b`.
    Torque2 {
        /// Torque signal, N m.
        tau: Signal,
    },
    /// Prescribed motion from three signals (MSL `Move`): the flange is at `phi(t)` relative to
    /// the support, turning at `w(t)` and accelerating at `a(t)`, whatever torque that takes.
    /// The three must be consistent (`w = phi'`, `a = w'`), as in the MSL; the solver imposes
    /// the speed `w(t)` with its rate `a(t)`, from the start values `phi(0)`, `w(0)`. Flanges
    /// `flange`, `support`.
    Move {
        /// Angle signal, rad.
        phi: Signal,
        /// Speed signal, rad/s.
        w: Signal,
        /// Acceleration signal, rad/s^2.
        a: Signal,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Constant speed (MSL `ConstantSpeed`): the flange turns at `w_fixed` relative to the
    /// support whatever torque that takes. Flanges `flange`, `support`.
    ConstantSpeed {
        /// Speed, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        w_fixed: f64,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
        /// Fixed initial angle of the flange relative to the support, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_start: Option<f64>,
    },
    /// Prescribed acceleration (MSL `Accelerate`): the flange's speed relative to the support
    /// is `w_start` plus the integral of `a_ref` (a [`Signal::Integral`]), whatever torque that
    /// takes. Flanges `flange`, `support`.
    Accelerate {
        /// Acceleration signal, rad/s^2.
        a_ref: Signal,
        /// Initial speed of the flange relative to the support, rad/s (fixed). Default 0.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_start: f64,
        /// Fixed initial angle of the flange relative to the support, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_start: Option<f64>,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Angle sensor (MSL `AngleSensor`): the CSV column `NAME.phi`, the flange's angle, rad.
    /// Flange `flange`; it takes no torque.
    AngleSensor {},
    /// Speed sensor (MSL `SpeedSensor`): the CSV column `NAME.w`, the flange's speed, rad/s.
    /// Flange `flange`; it takes no torque.
    SpeedSensor {},
    /// Relative angle sensor (MSL `RelAngleSensor`): `NAME.phi_rel = phi_b - phi_a`, rad.
    /// Flanges `flange_a`, `flange_b`; it takes no torque.
    RelAngleSensor {},
    /// Relative speed sensor (MSL `RelSpeedSensor`): `NAME.w_rel = w_b - w_a`, rad/s. Flanges
    /// `flange_a`, `flange_b`; it takes no torque.
    RelSpeedSensor {},
    /// Torque sensor (MSL `TorqueSensor`): joins `flange_a` and `flange_b` rigidly and reports
    /// the torque passed through, `NAME.tau = flange_a.tau`, N m (positive when `flange_a`'s
    /// side drives `flange_b`'s forwards).
    TorqueSensor {},
    /// Power sensor (MSL `PowerSensor`): a rigid joint like [`ElementKind::TorqueSensor`];
    /// `NAME.power = flange_a.tau w`, W.
    PowerSensor {},
    /// Acceleration sensor (MSL `AccSensor`): `NAME.a`, the flange's angular acceleration at
    /// each step end, rad/s^2 (from the forces in the mode the step ends in). No torque.
    /// Flange `flange`.
    AccSensor {},
    /// Relative acceleration sensor (MSL `RelAccSensor`): `NAME.a_rel`, the acceleration of
    /// `flange_b` relative to `flange_a` at each step end, rad/s^2. No torque. Flanges
    /// `flange_a`, `flange_b`.
    RelAccSensor {},
    /// Multi sensor (MSL `MultiSensor`): a rigid joint like [`ElementKind::TorqueSensor`];
    /// `NAME.tau` (N m), `NAME.w` (rad/s) and `NAME.power` (W).
    MultiSensor {},
    /// Lumped heat capacity (MSL `Thermal.HeatTransfer.Components.HeatCapacitor`):
    /// `C dT/dt = port.Q_flow`. Heat port `port`. CSV: `NAME.T`, K.
    HeatCapacitor {
        /// Heat capacity, J/K (> 0).
        /// Plausible range: 1e-6 .. 1e9 J/K.
        C: f64,
        /// Initial temperature, K (> 0, fixed). Default 293.15.
        /// Plausible range: 1 .. 1e4 K.
        #[serde(default = "room")]
        T_start: f64,
    },
    /// Heat conduction without storage (MSL `ThermalConductor`):
    /// `Q_flow = G (port_a.T - port_b.T)` from `port_a` to `port_b`. Heat ports `port_a`,
    /// `port_b`. CSV: `NAME.Q_flow`, W.
    ThermalConductor {
        /// Thermal conductance, W/K (>= 0).
        /// Plausible range: 0 .. 1e7 W/K.
        G: f64,
    },
    /// Convective heat transfer (MSL `Convection`): `Q_flow = Gc (solid.T - fluid.T)` from
    /// `solid` to `fluid`, with the convective conductance `Gc` a signal (W/K, read at the end
    /// of each step; a negative value counts as 0). Heat ports `solid`, `fluid`.
    /// CSV: `NAME.Q_flow`, W.
    Convection {
        /// Convective thermal conductance, W/K: a signal.
        Gc: Signal,
    },
    /// A port held at a fixed temperature (MSL `FixedTemperature`): an infinite reservoir.
    /// Heat port `port`.
    FixedTemperature {
        /// Temperature, K (> 0).
        /// Plausible range: 1 .. 1e4 K.
        T: f64,
    },
    /// A fixed heat flow into a port (MSL `FixedHeatFlow`):
    /// `Q_flow (1 + alpha (port.T - T_ref))` W flow into the port. Heat port `port`.
    FixedHeatFlow {
        /// Heat flow at the reference temperature, W (negative draws heat out).
        /// Plausible range: -1e9 .. 1e9 W.
        Q_flow: f64,
        /// Reference temperature, K (> 0). Default 293.15.
        /// Plausible range: 1 .. 1e4 K.
        #[serde(default = "room")]
        T_ref: f64,
        /// Temperature coefficient of the heat flow, 1/K. Default 0.
        /// Plausible range: -1e-1 .. 1e-1 1/K.
        #[serde(default)]
        alpha: f64,
    },
    /// Relative states (MSL `RelativeStates`): no torque (`flange_a.tau = flange_b.tau = 0`);
    /// it names `phi_rel = phi_b - phi_a` and `w_rel` (CSV `NAME.phi_rel`, `NAME.w_rel`) and may
    /// fix their start values. MSL uses it to choose the states of the integration; the solver
    /// here integrates every body's angle and speed whatever the choice, so it changes nothing
    /// else. Flanges `flange_a`, `flange_b`.
    RelativeStates {
        /// Fixed initial phi_rel, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// Initial angle and speed of a flange (MSL `InitializeFlange`), no torque. The start values
    /// join the initial-value equations as an Inertia's do. (MSL's optional `a_start` fixes an
    /// initial acceleration; here every acceleration follows from the forces, so it has no
    /// counterpart.) Flange `flange`.
    InitializeFlange {
        /// Fixed initial angle of the flange, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_start: Option<f64>,
        /// Fixed initial speed of the flange, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_start: Option<f64>,
    },
    /// Rigid joint with an angle offset (MSL `Disc`): `phi_b = phi_a + deltaPhi`, the torque
    /// passed through. Flanges `flange_a`, `flange_b`.
    Disc {
        /// Angle of `flange_b` ahead of `flange_a`, rad. Default 0.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default = "zero")]
        deltaPhi: f64,
    },
    /// Ideal gear from rotation to translation (MSL `IdealGearR2T`): `phi_R = ratio s_T`,
    /// `0 = ratio tau_R + f_T` (the supports fixed). Flanges `flangeR` (rotational), `flangeT`
    /// (translational).
    IdealGearR2T {
        /// Transmission ratio, rad/m (non-zero, finite).
        /// Plausible range: 1e-3 .. 1000 in magnitude.
        ratio: f64,
    },
    /// Ideal gear `phi_a - phi_s = ratio (phi_b - phi_s)`, `0 = ratio tau_a + tau_b`.
    /// Flanges `flange_a`, `flange_b`, `support`.
    IdealGear {
        /// Transmission ratio phi_a / phi_b (non-zero, finite).
        /// Plausible range: 1e-3 .. 1000 in magnitude.
        ratio: f64,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Gear with mesh efficiency and bearing friction (MSL `LossyGear`): kinematics of
    /// [`ElementKind::IdealGear`], loss torque on side a from the four-quadrant law of
    /// `loss_table` rows `[|w_a|, eta_mf1, eta_mf2, tau_bf1, tau_bf2]`; it sticks (self-locks)
    /// while the loss range at standstill absorbs the applied torques. Modes: -1, 0, 1 (2 when
    /// the table is ideal).
    LossyGear {
        /// Transmission ratio phi_a / phi_b (non-zero).
        /// Plausible range: 1e-3 .. 1000 in magnitude.
        ratio: f64,
        /// Rows `[|w_a| rad/s, eta_mf1, eta_mf2, tau_bf1 N m, tau_bf2 N m]`, increasing speed,
        /// first row at 0, efficiencies in [0.01, 1] (the plausible range), bearing torques within
        /// 0 .. 1e6 N m, speeds within 1e4 rad/s. Default ideal.
        #[serde(default = "ideal_loss")]
        loss_table: Vec<[f64; 5]>,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// A gearbox (MSL `Gearbox`): a [`ElementKind::LossyGear`] from `flange_a` to the gear
    /// mesh, then an [`ElementKind::ElastoBacklash`] (`c`, `d`, `b`, centred at 0) from the mesh
    /// to `flange_b`. The mesh is a massless junction, flange `mesh`, which the gear determines
    /// (connect an Inertia there for the gear wheel's inertia). `phi_rel` and `w_rel` are
    /// across the elasticity (`flange_b - mesh`), `tau` is `flange_b.tau`, the mode the lossy
    /// gear's. Flanges `flange_a`, `flange_b`, `support`, `mesh`; heat port `heatPort`.
    Gearbox {
        /// Transmission ratio phi_a / phi_mesh (non-zero).
        /// Plausible range: 1e-3 .. 1000 in magnitude.
        ratio: f64,
        /// The loss table of [`ElementKind::LossyGear`]. Default ideal.
        #[serde(default = "ideal_loss")]
        loss_table: Vec<[f64; 5]>,
        /// Gear elasticity, N m/rad (> 0).
        /// Plausible range: 0 .. 1e8 N m/rad.
        c: f64,
        /// Gear damping, N m s/rad (>= 0). Default 0.
        /// Plausible range: 0 .. 1e6 N m s/rad.
        #[serde(default)]
        d: f64,
        /// Total backlash, rad (>= 0). Default 0.
        /// Plausible range: 0 .. 10 rad.
        #[serde(default)]
        b: f64,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
        /// Fixed initial phi_rel across the elasticity, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel across the elasticity, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// Simple planetary set (Willis): `(1 + ratio) w_carrier = w_sun + ratio w_ring`,
    /// `ratio = z_ring / z_sun`. Flanges `sun`, `carrier`, `ring`. Massless.
    IdealPlanetary {
        /// Ring / sun tooth ratio (> 0).
        /// Plausible range: 1e-3 .. 1000 in magnitude.
        ratio: f64,
    },
    /// Linear spring `tau = c (phi_rel - phi_rel0)`.
    Spring {
        /// Stiffness, N m/rad (> 0).
        /// Plausible range: 0 .. 1e8 N m/rad.
        c: f64,
        /// Unstretched relative angle, rad. Default 0.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default = "zero")]
        phi_rel0: f64,
        /// Fixed initial phi_rel, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// Linear damper `tau = d w_rel`.
    Damper {
        /// Damping, N m s/rad (>= 0).
        /// Plausible range: 0 .. 1e6 N m s/rad.
        d: f64,
        /// Fixed initial phi_rel, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// Spring and damper in parallel, `tau = c (phi_rel - phi_rel0) + d w_rel`.
    SpringDamper {
        /// Stiffness, N m/rad (> 0).
        /// Plausible range: 0 .. 1e8 N m/rad.
        c: f64,
        /// Damping, N m s/rad (>= 0).
        /// Plausible range: 0 .. 1e6 N m s/rad.
        d: f64,
        /// Unstretched relative angle, rad. Default 0.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default = "zero")]
        phi_rel0: f64,
        /// Fixed initial phi_rel, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// Spring-damper with total backlash `b` (MSL 4 `ElastoBacklash`): contact only pushes, and
    /// the damping part never exceeds the spring part.
    ElastoBacklash {
        /// Contact stiffness, N m/rad (> 0).
        /// Plausible range: 0 .. 1e8 N m/rad.
        c: f64,
        /// Contact damping, N m s/rad (>= 0).
        /// Plausible range: 0 .. 1e6 N m s/rad.
        d: f64,
        /// Total backlash, rad (>= 0).
        /// Plausible range: 0 .. 10 rad.
        b: f64,
        /// Relative angle at the gap centre, rad. Default 0.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default = "zero")]
        phi_rel0: f64,
        /// Fixed initial phi_rel, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// MSL `ElastoBacklash2`: as [`ElementKind::ElastoBacklash`], but in contact the whole
    /// spring-damper torque `c x + d w_rel` acts while it pushes (0 when it would pull): the
    /// torque jumps by the damping part when contact starts. `lossPower = d w_rel^2` in
    /// contact. Flanges `flange_a`, `flange_b`.
    ElastoBacklash2 {
        /// Contact stiffness, N m/rad (> 0).
        /// Plausible range: 0 .. 1e8 N m/rad.
        c: f64,
        /// Contact damping, N m s/rad (>= 0).
        /// Plausible range: 0 .. 1e6 N m s/rad.
        d: f64,
        /// Total backlash, rad (>= 0).
        /// Plausible range: 0 .. 10 rad.
        b: f64,
        /// Relative angle at the gap centre, rad. Default 0.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default = "zero")]
        phi_rel0: f64,
        /// Fixed initial phi_rel, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// Friction clutch between `flange_a` and `flange_b`: `tau0 = mu(0) cgeo fn`, static limit
    /// `peak tau0`, sliding torque `cgeo fn mu(|w_rel|)` against the slip, `fn = fn_max f_normalized`.
    Clutch {
        /// Friction coefficient over slip speed `[(w >= 0, mu)]`. Default constant 0.5.
        #[serde(default = "default_mu")]
        mu_pos: Table1D,
        /// Static / kinetic ratio at zero slip (>= 1). Default 1.
        /// Plausible range: 1 .. 100 (static / kinetic).
        #[serde(default = "one")]
        peak: f64,
        /// Geometry factor, m (>= 0): `N (r_o + r_i)/2` for N surfaces. Default 1.
        /// Plausible range: 0 .. 10 m.
        #[serde(default = "one")]
        cgeo: f64,
        /// Maximum normal force, N (>= 0).
        /// Plausible range: 0 .. 1e7 N.
        fn_max: f64,
        /// Normalised normal force signal, normally 0..1; `<= 0` opens the clutch.
        f_normalized: Signal,
        /// Fixed initial phi_rel, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// Freewheel in parallel with a clutch (MSL `OneWayClutch`) between `flange_a` and
    /// `flange_b`: `w_rel = w_b - w_a >= 0` overruns; it takes whatever torque keeps `w_rel` from
    /// going negative, releases forwards above `max(peak, 1 + 1e-4) tau0` (engaged) or the tiny
    /// `1e-4 mu(0) cgeo fn_max` (disengaged), and transmits `cgeo fn mu(w_rel)` while overrunning
    /// engaged. Modes: 0 locked, 1 overrunning.
    OneWayClutch {
        /// See [`ElementKind::Clutch`].
        #[serde(default = "default_mu")]
        mu_pos: Table1D,
        /// See [`ElementKind::Clutch`].
        /// Plausible range: 1 .. 100 (static / kinetic).
        #[serde(default = "one")]
        peak: f64,
        /// See [`ElementKind::Clutch`].
        /// Plausible range: 0 .. 10 m.
        #[serde(default = "one")]
        cgeo: f64,
        /// See [`ElementKind::Clutch`].
        /// Plausible range: 0 .. 1e7 N.
        fn_max: f64,
        /// Normalised normal force of the parallel clutch; `<= 0` leaves the bare freewheel.
        f_normalized: Signal,
        /// Fixed initial phi_rel, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// Unified elastic clutch (Hung Nguyen Quang, 1998) between `flange_a` and `flange_b`: a shear spring `S`
    /// and damper `D` (shafts, discs, tangential springs reduced to the clutch) in series with a
    /// torque limiter `T_s(t)`, the sliding torque of the plates. It sticks while
    /// `|S (phi_rel - anchor) + D w_rel| <= T_s`, slides at `+-T_s` otherwise, and sticks again
    /// when the relative speed reverses. Modes: 0 stick, +-1 slide.
    ElasticClutch {
        /// Shear stiffness, N m/rad (> 0).
        /// Plausible range: 0 .. 1e8 N m/rad.
        S: f64,
        /// Shear damping, N m s/rad (>= 0).
        /// Plausible range: 0 .. 1e6 N m s/rad.
        D: f64,
        /// Sliding torque limit `T_s(t)`, N m (values < 0 count as 0).
        limit: Signal,
        /// Fixed initial phi_rel, rad.
        /// Plausible range: -1e6 .. 1e6 rad.
        #[serde(default)]
        phi_rel_start: Option<f64>,
        /// Fixed initial w_rel, rad/s.
        /// Plausible range: -1e4 .. 1e4 rad/s.
        #[serde(default)]
        w_rel_start: Option<f64>,
    },
    /// Brake between the shaft (`flange_a` = `flange_b`) and the `support`; same law as `Clutch`
    /// with the shaft speed relative to the support.
    Brake {
        /// See [`ElementKind::Clutch`].
        #[serde(default = "default_mu")]
        mu_pos: Table1D,
        /// See [`ElementKind::Clutch`].
        /// Plausible range: 1 .. 100 (static / kinetic).
        #[serde(default = "one")]
        peak: f64,
        /// See [`ElementKind::Clutch`].
        /// Plausible range: 0 .. 10 m.
        #[serde(default = "one")]
        cgeo: f64,
        /// See [`ElementKind::Clutch`].
        /// Plausible range: 0 .. 1e7 N.
        fn_max: f64,
        /// See [`ElementKind::Clutch`].
        f_normalized: Signal,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Coulomb bearing friction on the shaft relative to the support: `tau_pos = [(w, tau)]`,
    /// static limit `peak tau_pos(0)`. Never free.
    BearingFriction {
        /// Friction torque over speed `[(w >= 0, tau)]`, N m. Default constant 1.
        #[serde(default = "default_tau_pos")]
        tau_pos: Table1D,
        /// Static / kinetic ratio (>= 1). Default 1.
        /// Plausible range: 1 .. 100 (static / kinetic).
        #[serde(default = "one")]
        peak: f64,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Translational point mass (kg), flanges `flange_a`, `flange_b` (rigidly joined).
    Mass {
        /// Mass, kg (>= 0).
        /// Plausible range: 0, or 1e-12 .. 1e6 kg.
        m: f64,
        /// Fixed initial position, m.
        /// Plausible range: -1e9 .. 1e9 m.
        #[serde(default)]
        s_start: Option<f64>,
        /// Fixed initial velocity, m/s.
        /// Plausible range: -1000 .. 1000 m/s.
        #[serde(default)]
        v_start: Option<f64>,
    },
    /// Ideal rolling wheel: `radius (phi_R - phi_supportR) = s_T - s_supportT`, `0 = radius f_T + tau_R`.
    /// Flanges `flangeR` (rotational), `flangeT` (translational).
    IdealRollingWheel {
        /// Wheel radius, m (> 0).
        /// Plausible range: 5e-2 .. 5 m.
        radius: f64,
    },
    /// Speed-dependent force on a translational flange: `f = -f_nominal (v/v_nominal)^2` (or
    /// with `sign(v)` when `force_direction = false`); negative `f_nominal` is a drag load.
    QuadraticSpeedDependentForce {
        /// Force at the nominal speed, N.
        /// Plausible range: -1e7 .. 1e7 N.
        f_nominal: f64,
        /// Nominal speed, m/s (> 0).
        /// Plausible range: 1e-3 .. 1000 m/s.
        v_nominal: f64,
        /// True: same direction for both signs of v. Default true.
        #[serde(default = "yes")]
        force_direction: bool,
    },
    /// Force source on a translational flange from a signal, N (reaction into the ground): a
    /// grade force, a tow rope. Flange `flange`.
    Force {
        /// The force, N (positive pushes towards +s).
        f: Signal,
    },
    /// Translational speed source: the flange moves at `v_ref(t)` against the ground (the
    /// ground under a wheel, written by a game's own chassis), or against the `support` flange
    /// with `use_support` (a contact point moving relative to a chassis). Flanges `flange`,
    /// `support`.
    LinearSpeed {
        /// Reference speed signal, m/s.
        v_ref: Signal,
        /// Fixed initial position, m (relative to the support with `use_support`).
        /// Plausible range: -1e9 .. 1e9 m.
        #[serde(default)]
        s_start: Option<f64>,
        /// Whether the speed is relative to the `support` flange (connected) rather than to the
        /// ground. Default false.
        #[serde(default)]
        use_support: bool,
    },
    /// Combustion engine torque from a map (see [`crate::torque_map`]):
    /// `tau = T(throttle, w_rel)` with `w_rel` the crankshaft speed relative to the support.
    /// Flanges `flange`, `support`. The crankshaft inertia is a separate [`ElementKind::Inertia`].
    Engine {
        /// Torque map over throttle and engine speed.
        map: TorqueMapSpec,
        /// Effective throttle in [0, 1] (values outside are clamped; NaN gives no torque).
        throttle: Signal,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Hydrodynamic torque converter (see [`crate::converter`]): flanges `pump` (impeller),
    /// `turbine` and `support` (the housing that takes the stator reaction). The pump and
    /// turbine inertias are separate [`ElementKind::Inertia`] elements; a lock-up clutch is a
    /// [`ElementKind::Clutch`] between the same shafts.
    TorqueConverter {
        /// `K` and `TR` over the speed ratio.
        map: ConverterSpec,
        /// See [`ElementKind::Torque`].
        #[serde(default)]
        use_support: bool,
    },
    /// Dog clutch, dynamic model with backlash (after the Simscape Driveline Dog Clutch). Flanges `flange_a` (hub) and
    /// `flange_b` (ring). While `engaged > 0.5` the dogs are in: inside the free play
    /// `|phi| <= backlash/2` no torque, beyond it `tau = c (phi -+ backlash/2) + d w_rel`, with `phi`
    /// the relative angle from the nearest gap centre (pitch `360/teeth` deg). Whether the dogs
    /// may drop in (overlap, speed, alignment) is the shift linkage's business.
    DogClutch {
        /// Number of dogs (>= 1).
        teeth: u32,
        /// Ring-hub torsional stiffness, N m/rad (> 0).
        /// Plausible range: 0 .. 1e8 N m/rad.
        c: f64,
        /// Ring-hub damping, N m s/rad (>= 0).
        /// Plausible range: 0 .. 1e6 N m s/rad.
        d: f64,
        /// Total angular free play, rad (in [0, 2 pi / teeth)).
        /// Plausible range: +-1e7 (`limits::MAGNITUDE`).
        backlash: f64,
        /// Relative angle at which a ring dog sits centred in a hub gap, rad; the Simscape Driveline Dog Clutch allows
        /// `|offset| <= pi / teeth`. Default 0.
        /// Plausible range: +-1e7 (`limits::MAGNITUDE`).
        #[serde(default)]
        offset: f64,
        /// Engagement (> 0.5: engaged).
        engaged: Signal,
    },
    /// Clutch-pack limited-slip coupling between a differential's two outputs (flanges
    /// `flange_a`, `flange_b`): a friction element whose locking torque, the largest
    /// `|T_a - T_b|`, is `L = preload + ramp |T_in|`; the pack carries at most `L / 2`. `T_in`
    /// is the differential's input torque, `sum scale_j flange_b torque of gear j` (the torque the
    /// named IdealGears deliver at their b-side); the ramp is `power_ramp` while `T_in` drives the
    /// `carrier` element forward (`T_in >= 0`, whatever the direction of motion: reversing
    /// under power bears on the coast flanks) and `coast_ramp` otherwise (1-way: coast 0;
    /// 1.5-way: coast < power; 2-way: equal). Solved with the coupled step, not from the last
    /// step.
    LimitedSlip {
        /// Preload, N m (>= 0).
        /// Plausible range: 0 .. 1e4 N m.
        preload: f64,
        /// Locking torque per input torque on power (>= 0).
        /// Plausible range: 0 .. 10.
        power_ramp: f64,
        /// Locking torque per input torque on coast (>= 0).
        /// Plausible range: 0 .. 10.
        coast_ramp: f64,
        /// One or two `(IdealGear name, scale)` pairs giving the input torque.
        input: Vec<(String, f64)>,
        /// Name of the Inertia on the differential carrier, whose positive direction is forward
        /// (checked to be an Inertia).
        carrier: String,
    },
    /// Longitudinal tyre (see [`crate::tyre`]): a friction element between the wheel and the
    /// ground under it. Flanges `wheel` (rotational), `ground` (translational: the vehicle body,
    /// or a speed-prescribed ground). Rolls without slip up to the peak force `D F_z`, slides
    /// on the falling Magic Formula branch beyond it.
    Tyre {
        /// Rolling radius, m (> 0).
        /// Plausible range: 5e-2 .. 5 m.
        radius: f64,
        /// Magic Formula coefficients (default: dry road tyre).
        #[serde(default)]
        mf: MagicFormula,
        /// Normal load `F_z`, N (<= 0: the wheel is in the air and transmits nothing).
        load: Signal,
        /// Lower bound of the slip-ratio denominator, m/s (> 0, default 1).
        /// Plausible range: 1e-6 .. 10 m/s.
        #[serde(default = "default_v_low")]
        v_low: f64,
    },
}

/// Physical domain of a flange: connected flanges must share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// Angle in rad, torque in N m.
    Rotational,
    /// Position in m, force in N.
    Translational,
}

/// The regularised `sign(w)` of [`ElementKind::SignTorque`] (MSL
/// `Modelica.Blocks.Types.Regularization`), `x = w / w0`:
/// - `Exp`: `2 / (1 + exp(-100 x)) - 1` (reaches +-1 to 4e-44 at `|x| = 1`);
/// - `Sine`: `sin(pi x / 2)` for `|x| < 1`, else `sign(x)`;
/// - `Linear`: `x` for `|x| < 1`, else `sign(x)`;
/// - `CoSine`: `sign(x) (1 - cos(pi x / 2))` for `|x| < 1`, else `sign(x)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Regularization {
    /// Logistic curve (the MSL default).
    #[default]
    Exp,
    /// Quarter sine.
    Sine,
    /// Straight line.
    Linear,
    /// One minus a quarter cosine.
    CoSine,
}

/// Whether a flange must be connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// May stay open (zero torque).
    Optional,
    /// Must be connected.
    Required,
    /// A support: must be connected when `use_support = true`, must not be otherwise.
    Support,
}

/// The whole network: elements and flange connections `("a.flange_b", "b.flange_a")`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkSpec {
    /// The elements.
    pub elements: Vec<ElementSpec>,
    /// Pairs of flanges joined rigidly (equal angles, cut torques summing to zero).
    pub connections: Vec<(String, String)>,
}

//! # driveline_core
//!
//! The numeric core of Driveline: element laws, network assembly, the exact fixed-step
//! stick-slip solver and scenario files. No Bevy; everything here is plain data and functions,
//! tested and benchmarked on its own.
//!
//! ## Getting started
//! ```
//! use driveline_core::{ElementKind, ElementSpec, Network, NetworkSpec, Signal, Simulation};
//! // A flywheel spun up by a constant 2 N m from rest: w(t) = 2 t / J.
//! let spec = NetworkSpec {
//!     elements: vec![
//!         ElementSpec { name: "J".into(), kind: ElementKind::Inertia { J: 0.5, phi_start: Some(0.0), w_start: Some(0.0) } },
//!         ElementSpec { name: "motor".into(), kind: ElementKind::Torque { tau: Signal::Constant(2.0), use_support: false } },
//!     ],
//!     connections: vec![("motor.flange".into(), "J.flange_a".into())],
//! };
//! let mut sim = Simulation::new(Network::build(&spec).unwrap());
//! for _ in 0..1000 {
//!     sim.step(1e-3).unwrap();
//! }
//! let (_, w) = sim.body_state(0).unwrap();
//! assert!((w - 4.0).abs() < 1e-12);
//! ```
//!
//! ## Concepts
//! - **Flanges and nodes.** Every element has named flanges (`flange_a`, `flange_b`, `support`,
//!   `sun`, ...). Connected flanges form a *node* with one angle; inertias lump onto their node.
//!   Nodes joined to a `Fixed` are grounds.
//! - **Sign conventions** (Modelica.Mechanics.Rotational): `phi_rel = phi_b - phi_a`; a
//!   two-flange element with torque `tau` pushes its a-side body with `+tau` and its b-side body
//!   with `-tau`; a torque source with positive signal accelerates its flange forwards.
//! - **Friction modes** use the MSL codes: -1 sliding backward, 0 stuck, 1 sliding forward,
//!   2 free. A stuck element carries whatever torque keeps its slip at zero, up to
//!   `peak * tau0`; a sliding one carries its kinetic torque against the slip.
//!
//! ## The solver
//! See [`solver`]: per step, a joint complementarity solve of all stuck candidates, Gauss-Legendre
//! (order 4, A-stable) integration on the null space of the active constraints (so locks are
//! exact), and event location inside the step. Every tunable is in [`IntegrationParameters`].
//! A mode whose applied torques read the signals only (torque sources, sliding clutches with a
//! constant friction coefficient, no compliance: MSL `CoupledClutches`) steps through a
//! precomputed kernel instead, with the same event tests; [`StepStats::time_only_substeps`]
//! counts those steps.
//!
//! ## Element catalogue
//! Every element, its flanges, parameters (units, defaults) and equation is documented on
//! [`ElementKind`]; the laws themselves live in [`elements`], one place each. Every parameter
//! has a plausible range, stated on its field of [`ElementKind`] and listed by name in
//! [`limits::RANGES`] (signals within [`limits::SIGNAL`], times within [`limits::TIME`];
//! friction tables: speeds within 1e4 rad/s, coefficients within 10, bearing torques within
//! 1e6 N m): a file with a value outside it is refused at the value's `file:line:col`, with the
//! range in the message. In short
//! (`phi_rel = phi_b - phi_a`, `w_rel` its rate, `tau` the element torque in MSL convention):
//!
//! | element | law |
//! |---|---|
//! | `Inertia`, `Mass` | `J a = sum of flange torques` |
//! | `Fixed` | `phi = phi0` |
//! | `Torque`, `ConstantTorque`, `TorqueStep` | `+tau(t)` on the flange, `-tau` on the support |
//! | `QuadraticSpeedDependentTorque/Force` | `tau = tau_nom (w/w_nom)^2` (or `sign(w)` times it) |
//! | `LinearSpeedDependentTorque` | `tau = tau_nom |w|/w_nom` (or `w/w_nom`) |
//! | `InverseSpeedDependentTorque` | `tau = tau_nom w_nom/|w|` (or `/w`) above `w0`; below it `tau_nom w_nom/w0` (or `tau_nom w_nom w/w0^2`) |
//! | `SignTorque` | `tau = tau_nominal s(w/w0)`, `s` a regularised sign (`Exp`: `tanh(50 x)`, `Sine`, `Linear`, `CoSine`) |
//! | `Torque2` | `-tau(t)` on `flange_a`, `+tau(t)` on `flange_b` |
//! | `AngleSensor`, `SpeedSensor` | read `phi`, `w` of their flange (CSV `NAME.phi`, `NAME.w`); no torque |
//! | `RelAngleSensor`, `RelSpeedSensor` | read `phi_rel`, `w_rel` (CSV under those names); no torque |
//! | `TorqueSensor`, `PowerSensor`, `MultiSensor` | a rigid joint `w_a = w_b`; read `tau = flange_a.tau`, `power = tau w` |
//! | `AccSensor`, `RelAccSensor` | read `a`, `a_rel` at each step end from the forces of the mode it ends in; no torque |
//! | `Speed`, `ConstantSpeed` | `w_flange - w_support = w_ref(t)` or `w_fixed` (prescribed; any torque) |
//! | `Position` | `phi_flange - phi_support = phi_ref(t)` (prescribed; any torque) |
//! | `Move` | `phi(t)`, `w(t)`, `a(t)` from three signals (prescribed as `w(t)` with rate `a(t)`) |
//! | `Accelerate` | `w_flange - w_support = w_start + integral of a_ref(t)` (prescribed; any torque) |
//! | `IdealGear` | `phi_a - phi_s = i (phi_b - phi_s)`, `0 = i tau_a + tau_b` |
//! | `LossyGear` | ideal kinematics, `0 = tau_b + i (tau_a - tauLoss)`, four-quadrant `tauLoss` |
//! | `Gearbox` | a `LossyGear` to a massless mesh, then an `ElastoBacklash` (`c`, `d`, `b`) to `flange_b` |
//! | `IdealPlanetary` | `(1 + r) w_c = w_s + r w_r`, `r = z_ring / z_sun`; one shaft may stay open (no torque) |
//! | `IdealRollingWheel` | `radius w_R = v_T` |
//! | `IdealGearR2T` | `w_R = ratio v_T`, `0 = ratio tau_R + f_T` |
//! | `Disc` | `phi_b = phi_a + deltaPhi` (a rigid joint; `tau = flange_a.tau`) |
//! | `RelativeStates`, `InitializeFlange` | no torque; `phi_rel`, `w_rel` (and their start values); a flange's start values |
//! | `Spring`, `Damper`, `SpringDamper` | `tau = c (phi_rel - phi_rel0) + d w_rel`; springs (`d = 0`) meeting at a flange with no inertia: `sum tau = 0` there, `phi_j = sum c_k phi_k / C` + offsets |
//! | `ElastoBacklash` | spring-damper beyond the half gap `b/2`; pushes only; damping capped |
//! | `ElastoBacklash2` | as `ElastoBacklash`, damping not capped (the torque jumps at contact) |
//! | `Clutch`, `Brake` | stuck: any `|tau| <= peak mu(0) cgeo fn`; sliding `tau = cgeo fn mu(|w|)` against the slip |
//! | `BearingFriction` | as `Brake` with `tau_pos(|w|)`, never free; on a prescribed motion it slides with it (stuck only while the motion's acceleration is zero, as for any friction element whose slip the kinematics fix) |
//! | `OneWayClutch` | holds `w_rel >= 0`; releases above `max(peak, 1+1e-4) tau0` |
//! | `KinematicClutch` | engaging: `w_rel` falls linearly to 0 in `shift_time`; releasing: torque ramps to 0 |
//! | `ElasticClutch` | shear spring `S`, damper `D` in series with the limiter `T_s(t)` |
//! | `Force` | `+f(t)` on a translational flange |
//! | `LinearSpeed` | `v_flange - v_support = v_ref(t)` (prescribed; any force; the support is the ground unless `use_support`): a game's ground under a wheel, a contact point on a chassis |
//! | `Engine` | `tau = T(theta(t), w)` from the torque map, bilinear (see [`torque_map`]) |
//! | `Tyre` | rolls (`R w = v`) up to `D F_z`; slides on the falling Magic Formula branch (see [`tyre`]) |
//! | `DogClutch` | engaged: `tau = c x + d w_rel` beyond the half backlash, `x` from the nearest gap centre |
//! | `LimitedSlip` | clutch pack, limit `(preload + ramp |T_in|)/2`, `T_in` from gear constraint torques |
//! | `TorqueConverter` | `T_p = (w_p/K(SR))^2`, `T_t = TR(SR) T_p`, housing takes `T_p - T_t`; coupling in coast (see [`converter`]) |
//! | `EddyCurrentTorque` | brakes with `tau = 2 tau_nom x/(1 + x^2)`, `x = w/(w_nom (1 + alpha20 (T - TRef)))`, `T` its heat port's |
//! | `HeatCapacitor` | `C dT/dt = Q_flow` (heat port `port`) |
//! | `ThermalConductor`, `Convection` | `Q_flow = G (T_a - T_b)`, `Gc (T_solid - T_fluid)` with `Gc` a signal |
//! | `FixedTemperature`, `FixedHeatFlow` | `T` held; `Q_flow (1 + alpha (T - T_ref))` into the port |
//!
//! An angle or speed sensor's reading is also a signal, `Measured("name")`, for the signal of a
//! `Torque`, `Torque2` or `Force`: the source then reads the motion (a speed governor), and the
//! solver differentiates it for Newton ([`elements::Expr`]). Torque, power and acceleration
//! readings follow from the forces and are outputs only.
//!
//! ### Heat ports
//! Every dissipative element (dampers, backlash, friction elements, lossy gears, the eddy current
//! brake, the vehicle couplings) has a `heatPort` that receives its `lossPower` when connected,
//! as in MSL with `useHeatPort = true`. Heat ports join a lumped thermal network of the elements
//! above (`Modelica.Thermal.HeatTransfer`). The solver integrates it after each step from the
//! heat each element dissipated in the step, exactly as the energy ledger books it, by the
//! implicit Euler rule (stable at any step; energy conserved; first order). A temperature
//! reaches the laws that read one through a run-time input that follows its slope (see
//! `solver::thermal` in the source; [`Simulation::element_temperature`],
//! [`Simulation::element_heat_flow`], [`Simulation::thermal_ledger`]). CSV: `NAME.T`,
//! `NAME.Q_flow`, `NAME.lossPower`.
//!
//! ### Sources
//! - The elements up to `OneWayClutch` above and `EddyCurrentTorque`, their sign conventions and
//!   the friction theory (static and kinetic friction, stuck and sliding modes, the requirements
//!   on the simulation tool): the Modelica Standard Library, `Modelica.Mechanics.Rotational`
//!   (MSL 4.0.0), and its newer `Clutch`; the thermal elements: `Modelica.Thermal.HeatTransfer`.
//! - `KinematicClutch`: Michael Tiller, "Clutch Modeling - Part II: Kinematic Clutches".
//! - `ElasticClutch`: Hung Nguyen Quang, "Dynamic modelling of friction clutches and application
//!   of this model in simulation of drive systems", Technical University of Budapest, 1998.
//! - `DogClutch` and the shift linkage: the Simscape Driveline Dog Clutch documentation.
//! - `Tyre`: the Magic Formula of Pacejka (see [`tyre`]); `TorqueConverter`: maps with
//!   NREL's ADVISOR data (see [`converter`]).
//!
//! ## Vehicles
//! [`vehicle`] builds a whole car from a `Vehicle(...)` file (engine, driver clutch, manual or
//! sequential gearbox with dog clutches, shift linkages and synchronisers, differentials, wheels,
//! tyres, brakes, body) into one network solved by the same step, plus the controllers that
//! drive it (engine controller, shift controller, linkage dynamics, clutch heat). Start with
//! [`vehicle::Vehicle::load`] and [`vehicle::Vehicle::step`]. A game's rigid-body chassis (avian,
//! rapier, its own) takes [`vehicle::Vehicle::new_chassis`]: the coupling scheme, stable at a
//! game's step and exact at standstill, and the combined-slip tyre are in [`vehicle::chassis`];
//! a chassis moved kinematically can prescribe the ground's speed
//! ([`vehicle::Vehicle::new_external`], `examples/external_chassis.rs`).
//!
//! ```
//! use driveline_core::{DriverInput, Vehicle};
//! let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/vehicles/nissan_350z.ron");
//! let mut car = Vehicle::load(&path).unwrap();
//! // Clutch down, first gear, wait for the synchroniser.
//! let mut input = DriverInput { clutch: 1.0, gear: 1, ..Default::default() };
//! for _ in 0..1200 {
//!     car.step(&input, 1e-3).unwrap();
//! }
//! assert_eq!(car.engaged_gear(), 1);
//! // Let the clutch up with some throttle: the car moves off.
//! input.throttle = 0.3;
//! for k in 0..2000 {
//!     input.clutch = (1.0 - k as f64 / 1000.0).max(0.0);
//!     car.step(&input, 1e-3).unwrap();
//! }
//! assert!(car.telemetry().speed > 1.0);
//! ```
//!
//! ## Automatic transmissions
//! [`automatic`] builds planetary gearboxes from tooth counts, permanent connections and a shift
//! matrix (`assets/gearboxes/*.ron`): [`automatic::GearboxSpec::analyse`] gives every gear's
//! ratio and element torque shares from the Willis equations, and rejects gears that leave a
//! free degree of freedom or lock the box. No ratio is stored: in the network each set is an
//! `IdealPlanetary`, each shift element a wet `Clutch` or `Brake`, and a gear is whatever the
//! closed elements leave. A vehicle's `automatic` section puts the box behind a
//! [`converter`] with a lock-up clutch and a park pawl; the transmission controller
//! ([`automatic::tcu`]) picks gears from shift lines over throttle and output speed, kicks down,
//! and shifts clutch-to-clutch (fill, torque phase, inertia phase with torque reduction, end),
//! reporting each shift's phases, output-torque dip, jerk, flare and element heat.
//!
//! ```
//! use driveline_core::automatic::Selector;
//! use driveline_core::{DriverInput, Vehicle};
//! let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/vehicles/sedan_8hp.ron");
//! let mut car = Vehicle::load(&path).unwrap();
//! // D with the brake held: the garage shift applies first gear; the converter stalls.
//! let mut input = DriverInput { selector: Selector::Drive, brake: 1.0, ..Default::default() };
//! for _ in 0..1000 {
//!     car.step(&input, 1e-3).unwrap();
//! }
//! assert_eq!(car.engaged_gear(), 1);
//! // Full throttle: off it goes, and the box shifts up by itself.
//! input.brake = 0.0;
//! input.throttle = 1.0;
//! for _ in 0..5000 {
//!     car.step(&input, 1e-3).unwrap();
//! }
//! assert!(car.engaged_gear() >= 2);
//! ```
//!
//! ## Friction as the solver sees it
//! Each friction element contributes a relative-speed row. At every mode selection the
//! zero-slip elements of a driveline form one boxed complementarity problem (torques bounded by
//! their static limits, relative accelerations zero inside the bounds); elements at a bound
//! with a non-zero acceleration break away to their kinetic torque. Locks are then rows of the
//! constraint set, so a locked clutch has no slip at all. See [`solver`].

//! ## Scheduling
//! [`Simulation::step`] is synchronous and allocation-free after the first step; call it from
//! any fixed-rate loop. The Bevy plugin runs it in a fixed schedule.
//!
//! A simulation is `Send`: step a fleet on as many threads as you like, each simulation on one
//! thread at a time. The scratch a step writes before it reads it is the thread's, one set per
//! network shape, lent to each simulation for the length of its step: a thread's first step of
//! a shape allocates that set, later steps of any simulation of that shape on the thread do not.
//! Results do not depend on which thread steps a simulation or what it stepped before.
//!
//! A thread that steps many vehicles in turn finds each one's state out of the caches (a
//! thousand sedans' state is more than a processor's last-level cache holds): call
//! [`Vehicle::prefetch`] on the next vehicle before stepping this one, and its state arrives
//! while this one computes. The hint changes no result. Whether it pays depends on the machine
//! (where the fleet's state fits the last-level cache, the processor's own prefetchers do
//! better): [`prefetch::HintTuner`] decides by measuring, as the Bevy plugin's fleet step does.
//! [`fleet::Fleet`] does all of this for a set of vehicles: it steps them on threads, each
//! thread a contiguous run of them, with the hints a tuner chooses.
//! What a fleet costs the process (CPU time over all threads, resident memory) is in
//! [`process`], which the benchmarks report.
//!
//! ## FAQ
//! - *Why does my clutch not lock?* Its slip must reach zero while the torque it would need
//!   stays within `peak * tau0`. Check `fn_max`, `cgeo`, `mu_pos` and the normal-force signal.
//! - *Why is my network rejected as massless?* A junction without inertia whose speed no gear
//!   determines has no dynamics; add an `Inertia` there.
//! - *Which step size?* Any: events are located inside the step and compliant elements are
//!   integrated implicitly (A-stable), so 1/60 s runs. Accuracy is order 4 between events; stiff
//!   shafts you do not resolve (`sqrt(c/J) dt > 1`) keep ringing at the wrong frequency rather
//!   than damping out, so give them physical damping.
//! - *Is it deterministic?* Yes: same inputs, same binary, bitwise-equal results; element order
//!   is the file (or entity spawn) order, never a hash order.
//! - *Two clutches lock the same shafts: who carries what?* The minimum-norm split within the
//!   static limits; the pair breaks away only when no split fits.
//! - *How do I drive it from a game?* Give signals as `Input(name: "...")` and call
//!   [`Simulation::set_input`] (or set `DrivelineInputs` in Bevy) before each step. For a whole
//!   car, fill a [`DriverInput`] and call [`Vehicle::step`].
//! - *What if I feed it garbage?* Nothing panics. A step size that is not a positive finite
//!   number, or too short to move the clock, is a [`StepError`]; a step longer than the
//!   network's [`Simulation::max_step`] (0.05 s, or less for a network whose springs and
//!   dampers are fast: [`Simulation::fastest_rate`]) is taken in equal pieces. A run-time input past
//!   +-[`limits::SIGNAL`] (an infinity included) is clamped, a NaN keeps the last valid value,
//!   and either raises one [`InputRejected`] per episode ([`Simulation::set_input`]; a vehicle's
//!   pedals and grade: [`vehicle::VehicleEventKind::InputRejected`]). A step whose state would go
//!   non-finite (a motion that truly runs away, a singular system), or whose Newton iteration
//!   converges on no cut, is refused with the bodies named and the state left at the step
//!   start ([`StepError::NonFinite`], [`StepError::Singular`], [`StepError::NotConverged`]):
//!   an unconverged iterate is never committed.
//! - *Can I save, restore or roll back?* [`Vehicle::snapshot`] and [`Vehicle::restore`]: a
//!   restored vehicle continues bit for bit; the driver model
//!   ([`vehicle::driver::Driver`]) saves beside it with serde.
//! - *Does a braked car creep on a hill?* No: brakes and tyres are friction elements; stuck,
//!   they hold exactly (no viscous stand-in), for as long as you like.
//! - *My automatic's gear ratio is not the published one.* Ratios come from the teeth, the
//!   connections and the shift matrix; `driveline ratios FILE --elements` prints them with each
//!   element's torque share, and `driveline check` names a gear that is under- or
//!   over-constrained.
//! - *Why does my dog box refuse a gear?* The dogs drop in only below `max_engage_speed` (and,
//!   with the backlash model, when a dog faces a gap); otherwise the sleeve is blocked at the
//!   tips and a `ShiftBlocked` event says so. Match the speeds (clutch, blip) and it goes in.
//! - *How fast is a step, and how do I make many cars cheaper?* A car steps in a microsecond or
//!   two (the README's figures table and docs/performance.md have the figures, the machine and
//!   how they were measured). For fleets: write
//!   inputs with [`Simulation::set_input_id`] (an unchanged value costs nothing); keep
//!   `track_energy` off if you do not read the energy ledger (a [`Vehicle`] steps without it
//!   unless [`Vehicle::set_track_energy`] asks; up to a fifth on the MSL examples, a sixth of a
//!   shift, see [`IntegrationParameters::track_energy`]);
//!   build the vehicles of one file from one description (they then share its compiled modes,
//!   description and layout: [`Simulation::shares_compiled_modes_with`]); and in Bevy
//!   mark the parts you never read `SkipWriteBack` (a fifth to a half of a fleet's time goes
//!   into writing every part's state). An input that steps at every step start (a controller
//!   output still moving) is followed by the stage predictor where the law is proportional to
//!   it (clutch, brake and tyre normal forces) or says how it responds (torque sources, engine
//!   throttles); other laws' inputs cost Newton a second iteration. Settled inputs cost
//!   nothing.
#![warn(missing_docs)]

pub mod automatic;
pub mod converter;
pub mod crew;
pub mod elements;
pub mod fleet;
pub mod limits;
pub mod linalg;
pub mod model;
pub mod network;
pub mod output;
pub mod prefetch;
pub mod process;
pub mod scenario;
pub mod signal;
mod snapshot;
pub mod solver;
pub mod table;
pub mod torque_map;
pub mod tyre;
pub mod vehicle;

pub use converter::{ConverterMap, ConverterSpec};
pub use model::{Domain, ElementKind, ElementSpec, NetworkSpec};
pub use network::{BuildError, Network};
pub use output::CsvRecorder;
pub use scenario::{Scenario, ScenarioError};
pub use signal::Signal;
pub use solver::{
    CouplingReading, ElementOutputs, EnergyLedger, Follow, FrictionMode, InputError, InputId, InputRejected,
    IntegrationParameters, MAX_STEP_TURN, MIN_OWN_MAX_STEP, ModeEvent, NewtonStart, RelativeOutputs, Simulation,
    StateAdjustment, StateWrite, StateWriteError, StepError, StepStats, ThermalLedger, UpdateError,
};
pub use table::{Locus, Table1D};
pub use torque_map::{TorqueMap, TorqueMapSpec};
pub use tyre::MagicFormula;
pub use vehicle::{DriverInput, SnapshotError, Vehicle, VehicleSnapshot, VehicleSpec};

//! Vehicles: engine, driver clutch, manual or sequential gearbox with dog clutches, shift
//! linkages and synchronisers, differentials, wheels, tyres, brakes and road load, as one
//! network solved by the coupled stick-slip step, plus the controllers that drive it.
//!
//! # One step
//! [`Vehicle::step`] runs, in this order and nowhere else:
//!
//! 1. **Input**: the [`DriverInput`] is checked. A pedal outside [0, 1] or a grade outside
//!    [-[`MAX_GRADE`], [`MAX_GRADE`]] (an infinity included) is clamped into its range; a NaN keeps
//!    the last valid value (0 at the start). Either raises [`VehicleEventKind::InputRejected`]
//!    once per episode: when the input turns bad, and not again until it has been valid for a
//!    step. Nothing non-finite reaches the controllers or the solve.
//! 2. **Control**: the shift controller (gear requests, interlock, auto-clutch, auto-blip,
//!    ignition cut) and the engine controller ([`ecu`]).
//! 3. **Actuation**: the shift linkages move ([`linkage`]), giving dog engagement and
//!    synchroniser cone forces; the pedal gives the clutch clamp force; brakes; tyre loads with
//!    the longitudinal load transfer of the last step; the grade force.
//! 4. **Element laws and one coupled solve**: [`crate::Simulation::step`]. Limited-slip packs are
//!    friction elements whose limit depends on the differential's input torque; that dependence
//!    is part of the coupled solve ([`crate::ElementKind::LimitedSlip`]).
//! 5. **Integrate** the clutch temperature and the fuel used; **telemetry** and events.
//!
//! The controllers read the driveline at the step start: they are sampled-data controllers
//! with the step as their period, like the ECUs and TCUs they stand for.

mod automatic;
pub mod build;
pub mod chassis;
pub mod driver;
pub mod ecu;
pub mod linkage;
mod manual;
mod persist;
pub mod spec;
mod step;
pub mod udp;

use crate::automatic::{ElementTelemetryArray, Selector, ShiftPhase, ShiftReport};
use crate::network::BuildError;
use crate::scenario::{ScenarioError, position_of};
pub use crate::snapshot::{SnapshotError, VehicleSnapshot};
use crate::solver::{InputId, Simulation, StateAdjustment, StateWrite, StateWriteError, StepError, UpdateError};
use crate::torque_map::RPM;
use crate::{FrictionMode, Network};
use automatic::AutoControl;
pub use build::{AutoLayout, G, GearSlot, Layout, Road, WHEELS};
use chassis::{ChassisIds, ChassisState};
pub use chassis::{ContactRejected, WheelContact, WheelForces};
use ecu::{Ecu, EcuEvent, EcuOutput};
use manual::Manual;
pub use spec::*;
use std::path::Path;
pub use step::{Controlled, StepPlan};

/// What the driver (or a test, or a gamepad mapping) asks for this step.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DriverInput {
    /// Accelerator pedal, [0, 1].
    pub throttle: f64,
    /// Brake pedal, [0, 1].
    pub brake: f64,
    /// Clutch pedal travel, [0, 1] (1 = floored, disengaged).
    pub clutch: f64,
    /// Parking brake lever, [0, 1].
    pub parking_brake: f64,
    /// H-pattern gearbox: the gear the lever is moved to (-1 reverse, 0 neutral, 1.. forward).
    pub gear: i32,
    /// Sequential gearbox, or an automatic in manual mode: request one gear up (acted on when
    /// it turns true).
    pub shift_up: bool,
    /// Sequential gearbox, or an automatic in manual mode: request one gear down (acted on
    /// when it turns true).
    pub shift_down: bool,
    /// Automatic: the selector (P, R, N, D, manual). Default park.
    pub selector: Selector,
    /// Ignition switch.
    pub ignition: bool,
    /// Starter button.
    pub starter: bool,
    /// Road grade, rise over run (0.2 = 20 % uphill; negative downhill), finite.
    pub grade: f64,
}

impl Default for DriverInput {
    fn default() -> Self {
        Self {
            throttle: 0.0,
            brake: 0.0,
            clutch: 0.0,
            parking_brake: 0.0,
            gear: 0,
            shift_up: false,
            shift_down: false,
            selector: Selector::Park,
            ignition: true,
            starter: false,
            grade: 0.0,
        }
    }
}

/// Something that happened during a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VehicleEvent {
    /// When, s.
    pub time: f64,
    /// What.
    pub kind: VehicleEventKind,
}

/// Vehicle event kinds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VehicleEventKind {
    /// The engine stalled.
    Stalled,
    /// The engine started.
    Started,
    /// The rev limiter cut the fuel.
    LimiterCut,
    /// A shift to `to` began.
    ShiftStarted {
        /// Gear before.
        from: i32,
        /// Gear asked for.
        to: i32,
    },
    /// The sleeve of `gear` was blocked at the dog tips (speed difference too high, or the
    /// teeth not aligned).
    ShiftBlocked {
        /// Gear.
        gear: i32,
    },
    /// The synchroniser of `gear` matched the speeds and let the sleeve through.
    SynchroIndexed {
        /// Gear.
        gear: i32,
    },
    /// The dogs of `gear` dropped in.
    DogEngaged {
        /// Gear.
        gear: i32,
    },
    /// The shift to `gear` completed (dogs fully in, or the on-coming element of an automatic
    /// locked and at full pressure) after `duration` seconds.
    ShiftCompleted {
        /// Gear.
        gear: i32,
        /// Time from the request, s.
        duration: f64,
        /// An automatic's shift figures: phases, output torque dip and overshoot, jerk, flare,
        /// energy and temperature per element.
        report: Option<ShiftReport>,
    },
    /// Automatic: the selector is in P but the car is too fast for the park pawl, which
    /// ratchets over the teeth.
    ParkRatchet,
    /// Automatic in manual mode: the gear asked for was refused (it does not exist, or the
    /// engine would over-rev).
    ShiftRefused {
        /// Gear.
        gear: i32,
    },
    /// The shift to `gear` did not complete within the timeout; the box went to neutral.
    ShiftAborted {
        /// Gear.
        gear: i32,
    },
    /// A gear that does not exist was asked for.
    NoSuchGear {
        /// Gear.
        gear: i32,
    },
    /// A driver input was out of its range or NaN (see [`DriverInput`]'s input policy): an
    /// out-of-range value (an infinity included) is clamped into the range, a NaN keeps the last
    /// valid value. Raised once per episode: when an input turns bad, not again until it has
    /// been valid for a step.
    InputRejected {
        /// Which input.
        input: InputName,
        /// The value given.
        value: f64,
        /// The value used.
        used: f64,
    },
    /// The step raised more events than a step's buffer holds ([`EVENTS_PER_STEP`]): the last
    /// `count` of them are not reported. (The buffer is sized once so that a step never
    /// allocates; the shipped vehicles raise at most three events in a 1/60 s step.)
    EventsDropped {
        /// Events not reported.
        count: u32,
    },
}

/// Events a step reports at most, [`VehicleEventKind::EventsDropped`] included: 8 (an event
/// takes 200 bytes, the room is every vehicle's).
pub const EVENTS_PER_STEP: usize = 8;

/// The numeric driver inputs, as [`VehicleEventKind::InputRejected`] names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputName {
    /// [`DriverInput::throttle`], [0, 1].
    Throttle,
    /// [`DriverInput::brake`], [0, 1].
    Brake,
    /// [`DriverInput::clutch`], [0, 1].
    Clutch,
    /// [`DriverInput::parking_brake`], [0, 1].
    ParkingBrake,
    /// [`DriverInput::grade`], [-[`MAX_GRADE`], [`MAX_GRADE`]].
    Grade,
}

impl InputName {
    /// The input's name as it is spelled in [`DriverInput`].
    pub fn as_str(self) -> &'static str {
        match self {
            InputName::Throttle => "throttle",
            InputName::Brake => "brake",
            InputName::Clutch => "clutch",
            InputName::ParkingBrake => "parking_brake",
            InputName::Grade => "grade",
        }
    }
}

/// The steepest road grade a vehicle takes, rise over run (1 = 45 degrees); a steeper one is
/// clamped to it.
pub const MAX_GRADE: f64 = 1.0;

/// The longest step a vehicle takes while its box shifts, s: the shift linkage (or the
/// automatic's controller and pistons) and the driveline exchange their state at this interval
/// (see [`VehicleControl::step`]).
pub const SHIFT_SUBSTEP: f64 = 1e-3;

/// The shortest step a vehicle's own rate may ask for, s ([`VehicleControl::set_max_step`]).
pub const MIN_MAX_STEP: f64 = 1e-6;

/// A gear as a driver reads it: `R` (`R2`, ...) for reverse, `N` for neutral, else its number.
pub fn gear_name(gear: i32) -> String {
    match gear {
        0 => "N".into(),
        -1 => "R".into(),
        g if g < 0 => format!("R{}", -g),
        g => g.to_string(),
    }
}

impl std::fmt::Display for VehicleEventKind {
    /// One line in a driver's words and human units, e.g. `shift to 2 completed in 412 ms`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VehicleEventKind::Stalled => write!(f, "engine stalled"),
            VehicleEventKind::Started => write!(f, "engine started"),
            VehicleEventKind::LimiterCut => write!(f, "rev limiter cut"),
            VehicleEventKind::ShiftStarted { from, to } => {
                write!(f, "shift {} -> {} started", gear_name(*from), gear_name(*to))
            }
            VehicleEventKind::ShiftBlocked { gear } => {
                write!(f, "shift to {} blocked at the dog tips", gear_name(*gear))
            }
            VehicleEventKind::SynchroIndexed { gear } => write!(f, "synchroniser of {} indexed", gear_name(*gear)),
            VehicleEventKind::DogEngaged { gear } => write!(f, "dogs of {} dropped in", gear_name(*gear)),
            VehicleEventKind::ShiftCompleted { gear, duration, report } => {
                write!(f, "shift to {} completed in {:.0} ms", gear_name(*gear), duration * 1e3)?;
                match report {
                    Some(r) => write!(f, ": {r}"),
                    None => Ok(()),
                }
            }
            VehicleEventKind::ParkRatchet => write!(f, "park pawl ratchets (too fast to engage)"),
            VehicleEventKind::ShiftRefused { gear } => write!(f, "shift to {} refused", gear_name(*gear)),
            VehicleEventKind::ShiftAborted { gear } => {
                write!(f, "shift to {} aborted (timeout; in neutral)", gear_name(*gear))
            }
            VehicleEventKind::NoSuchGear { gear } => write!(f, "no gear {}", gear_name(*gear)),
            VehicleEventKind::InputRejected { input, value, used } => {
                write!(f, "driver input {} = {value} is out of range; {used} used", input.as_str())
            }
            VehicleEventKind::EventsDropped { count } => write!(f, "{count} more events in this step not reported"),
        }
    }
}

/// Per-step outputs, all SI unless named otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Telemetry {
    /// Time, s.
    pub time: f64,
    /// Engine speed, rpm.
    pub engine_rpm: f64,
    /// Engine map torque, N m.
    pub engine_torque: f64,
    /// Effective throttle after idle control and cuts, [0, 1].
    pub throttle: f64,
    /// Engine running (not stalled).
    pub running: bool,
    /// Clutch slip (disc - engine), rad/s.
    pub clutch_slip: f64,
    /// Clutch torque, N m.
    pub clutch_torque: f64,
    /// Clutch normalised clamp force after fade, [0, 1].
    pub clutch_engagement: f64,
    /// Clutch temperature, deg C.
    pub clutch_temperature: f64,
    /// Clutch friction power, W.
    pub clutch_power: f64,
    /// Gear asked for (-1 R, 0 N).
    pub selected_gear: i32,
    /// Gear whose dogs are fully in (0: none).
    pub engaged_gear: i32,
    /// Sleeve positions, m (up to 6 sleeves).
    pub sleeves: [f64; 6],
    /// Ignition cut or torque reduction requested by the shift controller, [0, 1].
    pub torque_reduction: f64,
    /// Vehicle speed, m/s.
    pub speed: f64,
    /// Vehicle acceleration, m/s^2.
    pub acceleration: f64,
    /// Distance, m.
    pub distance: f64,
    /// Wheel speeds, rad/s (fl, fr, rl, rr).
    pub wheel_speed: [f64; 4],
    /// Tyre longitudinal forces, N: positive pushes the vehicle forward.
    pub tyre_force: [f64; 4],
    /// Tyre slip velocity `R w - v`, m/s (0 while rolling).
    pub tyre_slip: [f64; 4],
    /// Tyre normal loads, N.
    pub tyre_load: [f64; 4],
    /// Brake torques, N m.
    pub brake_torque: [f64; 4],
    /// Drive torque the driveline puts on each wheel (half shaft or hub), N m.
    pub drive_torque: [f64; 4],
    /// Fuel used, g.
    pub fuel_used: f64,
    /// Automatic: selector position.
    pub selector: Selector,
    /// Automatic: turbine (gearbox input) speed, rpm.
    pub turbine_rpm: f64,
    /// Automatic: converter turbine torque, N m.
    pub converter_torque: f64,
    /// Automatic: lock-up command, [0, 1].
    pub lockup_engagement: f64,
    /// Automatic: lock-up clutch stuck (engine and turbine locked together).
    pub lockup_locked: bool,
    /// Automatic: what the lock-up is asked to do (open, controlled slip, locked).
    pub lockup_mode: crate::automatic::LockupMode,
    /// Automatic: phase of the shift in progress.
    pub shift_phase: ShiftPhase,
    /// Automatic: every shift element, in the gearbox file's order.
    pub elements: ElementTelemetryArray,
}

/// Why a vehicle could not be built or loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VehicleError {
    /// A parameter is out of range.
    #[error("{}: {}", .0.path.join("."), .0.message)]
    Spec(SpecError),
    /// The generated network did not build (a bug or an extreme parameter).
    #[error("the vehicle's driveline does not build: {0}")]
    Build(#[from] BuildError),
    /// The automatic's gearbox file could not be read or is invalid.
    #[error("{0}")]
    Gearbox(ScenarioError),
}
#[derive(Clone)]
struct Ids {
    engine: usize,
    engine_torque: usize,
    output: usize,
    body: Option<usize>,
    wheels: [usize; 4],
    /// Elements whose torque is minus the drive torque on each wheel (hub or half shaft).
    drive: [Option<usize>; 4],
    tyres: [usize; 4],
    brakes: [usize; 4],
    throttle: InputId,
    starter: InputId,
    grade: Option<InputId>,
    ground_in: Option<[InputId; 4]>,
    /// [`Road::Chassis`]: the contact masses.
    chassis: Option<ChassisIds>,
    brake_in: [InputId; 4],
    load_in: [InputId; 4],
}

/// The transmission's controllers.
#[derive(Clone)]
enum Trans {
    Manual(Box<Manual>),
    Automatic(Box<AutoControl>),
}

/// What [`VehicleControl::before_step`] hands to [`VehicleControl::after_step`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PendingStep {
    v0: f64,
    throttle: f64,
    reduction: f64,
    clamp: f64,
}

/// A running vehicle: its simulation and its controllers.
#[derive(Clone)]
pub struct Vehicle {
    control: VehicleControl,
    sim: Simulation,
    telemetry: Telemetry,
}

/// The controllers of a vehicle (driver inputs, shift controller, engine controller, linkages,
/// heat) working on a [`Simulation`] they do not own, so that an ECS can keep the simulation
/// where its other drivelines are. [`Vehicle`] pairs the two for plain Rust use.
#[derive(Clone)]
pub struct VehicleControl {
    spec: std::sync::Arc<VehicleSpec>,
    layout: std::sync::Arc<Layout>,
    ids: Ids,
    /// Time of the step being taken (event stamps).
    now: f64,
    trans: Trans,
    ecu: Ecu,
    accel: f64,
    fuel: f64,
    events: Vec<VehicleEvent>,
    last_loads: [f64; 4],
    /// `(grade, sin, cos)` of the road's angle `atan(grade)`, evaluated when the grade changes.
    slope: (f64, f64, f64),
    surface: [f64; 4],
    /// External road: `(ground speed, load, ground acceleration)` per wheel.
    contact: [(f64, f64, f64); 4],
    /// External road: distance from the ground speeds.
    distance: f64,
    /// [`Road::Chassis`]: each wheel's contact as written and the coupling's state.
    chassis: ChassisState,
    /// Fingerprint of the description (spec, road and parameter updates): which snapshots
    /// restore into these controllers.
    fingerprint: u64,
    /// The state before a restore, put back if the restore fails (a buffer kept for reuse).
    backup: Vec<u64>,
    /// The numeric driver inputs last used (throttle, brake, clutch, parking brake, grade): a
    /// NaN keeps them.
    last_valid: [f64; 5],
    /// Which of them were rejected at the last step (an episode of rejection reports once).
    rejecting: [bool; 5],
    /// The built-in controllers that run.
    controllers: Controllers,
    /// The driveline's own longest step, s ([`VehicleControl::set_max_step`]; infinite: the
    /// caller's step).
    max_step: f64,
}

/// Which of a vehicle's built-in controllers run ([`VehicleControl::set_controllers`]). A
/// controller that does not run writes none of its inputs: they keep the values last written,
/// by it or by you ([`Simulation::set_input_id`], or in the Bevy plugin a part's
/// `ClutchEngagement` and `DrivelineInputs`). Everything else works as before. Not part of a
/// snapshot: it is the vehicle's configuration, not its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Controllers {
    /// The engine controller (idle speed, rev limiter, stall and start, the shift controller's
    /// torque reductions): writes the engine's `engine.throttle` and `starter.torque` inputs.
    /// Without it, the throttle input is the effective throttle the torque map sees, and fuel
    /// is counted while it is above zero. Default on.
    pub engine: bool,
    /// The transmission controller. For a manual or sequential box: the gear selection, the
    /// shift linkages and the clutch actuator (`clutch.force`, each dog's `engagement` and
    /// synchroniser's `force`). For an automatic: the TCU with its hydraulics, the lock-up and
    /// the park pawl (each shift element's and `lockup.force`, `park.engage`). Without it no
    /// shift is sub-stepped, the torque reduction is zero, and the telemetry's gear fields keep
    /// their last values. Default on.
    pub transmission: bool,
    /// A manual or sequential box's clutch actuator, part of the transmission controller: the
    /// pedal (or the auto-clutch) to the clutch's normalised normal force through the diaphragm
    /// spring, with fade; writes `clutch.force`. Without it `clutch.force` keeps what was
    /// written last while the gear selection and the shift linkages still run: a launch or a
    /// shift on your own clutch. An automatic has none. Default on.
    #[serde(default = "on")]
    pub clutch_actuator: bool,
    /// An automatic's hydraulic pistons, part of the transmission controller, one bit per shift
    /// element in the gearbox file's order (bit `k`: element `k`). A set bit lets element `k`'s
    /// piston write its `force` input (the TCU's pressure through the piston's fill and
    /// stroke); a clear bit leaves the input at what was written last while the TCU still runs
    /// its shifts: an element you drive yourself. A manual has none. Default every bit set.
    #[serde(default = "all_pistons")]
    pub pistons: u64,
    /// A manual or sequential box's shift linkages, part of the transmission controller, one
    /// bit per gear in the layout's order (`vehicle::build::Layout::gears`: first gear up,
    /// reverse last; bit `k`: gear `k`). A set bit lets the sleeve carrying gear `k` write its
    /// dog's `engagement` input and its synchroniser's `force` input; a clear bit leaves both
    /// at what was written last (a dog you drive yourself) while the sleeve still moves as the
    /// gear selection asks and the shift completes when the dog's engagement reaches 1. An
    /// automatic has none. Default every bit set.
    #[serde(default = "all_pistons")]
    pub linkages: u64,
}

/// [`Controllers::clutch_actuator`]'s default.
fn on() -> bool {
    true
}

/// [`Controllers::pistons`]' and [`Controllers::linkages`]' default.
fn all_pistons() -> u64 {
    u64::MAX
}

impl Default for Controllers {
    fn default() -> Self {
        Self {
            engine: true,
            transmission: true,
            clutch_actuator: true,
            pistons: all_pistons(),
            linkages: all_pistons(),
        }
    }
}

fn find(net: &Network, name: &str) -> usize {
    net.elements.iter().position(|e| e.name == name).unwrap_or_else(|| panic!("vehicle layout lacks `{name}`"))
}

/// Writes an input; every value written is finite by construction (inputs are sanitised first).
#[inline(always)]
fn set(sim: &mut Simulation, id: InputId, v: f64) {
    let _ = sim.set_input_id(id, if v.is_finite() { v } else { 0.0 });
}

fn id(sim: &Simulation, name: &str) -> InputId {
    sim.input_id(name).unwrap_or_else(|| panic!("vehicle layout lacks input `{name}`"))
}

impl Vehicle {
    /// Validates the description, builds its network and starts at rest in neutral with the
    /// engine idling, on its own body (a complete longitudinal vehicle).
    pub fn new(spec: VehicleSpec) -> Result<Self, VehicleError> {
        Self::with_road(spec, Road::Body)
    }

    /// Like [`Vehicle::new`], for a game with its own chassis physics: the tyres run on grounds
    /// whose speed and normal load the game writes with [`Vehicle::set_wheel_contact`] before
    /// every step; it reads [`Telemetry::tyre_force`] (to push its chassis),
    /// [`Telemetry::drive_torque`] and [`Telemetry::brake_torque`] back. The body's mass, drag
    /// and grade are then the game's business; the wheels, brakes and the whole driveline stay
    /// in the coupled solve. See `examples/external_chassis.rs`.
    pub fn new_external(spec: VehicleSpec) -> Result<Self, VehicleError> {
        Self::with_road(spec, Road::External)
    }

    /// Like [`Vehicle::new`], for a game's rigid-body chassis ([`Road::Chassis`]): before
    /// every physics step the game writes each wheel's [`WheelContact`]
    /// ([`Vehicle::set_chassis_contact`]); after it, it reads each wheel's [`WheelForces`]
    /// ([`Vehicle::wheel_forces`]) and applies them to its chassis. The coupling scheme is in
    /// [`chassis`].
    pub fn new_chassis(spec: VehicleSpec) -> Result<Self, VehicleError> {
        Self::with_road(spec, Road::Chassis)
    }

    fn with_road(mut spec: VehicleSpec, road: Road) -> Result<Self, VehicleError> {
        // A gearbox file not yet loaded is read relative to the working directory.
        if let Some(at) = &mut spec.automatic {
            at.resolve(Path::new(".")).map_err(VehicleError::Gearbox)?;
        }
        spec.validate().map_err(VehicleError::Spec)?;
        let (spec, layout) = build::shared(&spec, road);
        let net = Network::build(&layout.spec)?;
        let mut sim = Simulation::with_parameters(net, crate::IntegrationParameters::vehicle());
        let mut control = VehicleControl::new(spec, layout, road, &sim);
        let mut telemetry = Telemetry::default();
        control.start(&mut sim, &mut telemetry);
        Ok(Self { control, sim, telemetry })
    }

    /// Parses a vehicle file's text; errors carry `file:line:col`.
    pub fn parse(text: &str, file: &str) -> Result<VehicleSpec, ScenarioError> {
        crate::scenario::ron_options().from_str(text).map_err(|e| ScenarioError {
            file: file.to_string(),
            line: e.span.start.line,
            col: e.span.start.col,
            message: format!("{} (see the vehicle format in the driveline_core::vehicle::spec docs)", e.code),
        })
    }

    /// Reads, parses, validates and builds a vehicle file.
    pub fn load(path: &Path) -> Result<Vehicle, ScenarioError> {
        let (file, text) = crate::scenario::read(path)?;
        let spec = Self::parse(&text, &file)?;
        Self::from_text(spec, &text, &file)
    }

    /// Builds a parsed description, placing any error at its key in `text`. An automatic's
    /// gearbox file is read relative to `file`'s directory.
    pub fn from_text(mut spec: VehicleSpec, text: &str, file: &str) -> Result<Vehicle, ScenarioError> {
        if let Some(at) = &mut spec.automatic {
            at.resolve(Path::new(file).parent().unwrap_or(Path::new(".")))?;
        }
        Vehicle::new(spec).map_err(|e| {
            if let VehicleError::Gearbox(g) = e {
                return g;
            }
            let (line, col) = match &e {
                VehicleError::Spec(s) => locate(text, &s.path),
                VehicleError::Build(_) | VehicleError::Gearbox(_) => (1, 1),
            };
            ScenarioError { file: file.to_string(), line, col, message: e.to_string() }
        })
    }

    /// The description.
    pub fn spec(&self) -> &VehicleSpec {
        &self.control.spec
    }
    /// The underlying simulation (read access to every element).
    pub fn simulation(&self) -> &Simulation {
        &self.sim
    }

    /// Turns the solver's energy ledger on or off ([`Simulation::energy`]; off by default for
    /// a vehicle, see [`crate::IntegrationParameters::track_energy`]). Turned on, it starts
    /// over from the present state and books the steps taken from then on.
    pub fn set_track_energy(&mut self, on: bool) {
        self.sim.set_track_energy(on);
    }
    /// Which built-in controllers run ([`VehicleControl::controllers`]).
    pub fn controllers(&self) -> Controllers {
        self.control.controllers()
    }
    /// Turns built-in controllers off or on ([`VehicleControl::set_controllers`]).
    pub fn set_controllers(&mut self, controllers: Controllers) {
        self.control.set_controllers(controllers);
    }
    /// The driveline's own longest step, s ([`VehicleControl::max_step`]).
    pub fn max_step(&self) -> Option<f64> {
        self.control.max_step()
    }
    /// Runs the driveline at its own rate inside each [`Vehicle::step`]
    /// ([`VehicleControl::set_max_step`]).
    ///
    /// # Errors
    /// [`StepError::BadStep`] for a `max_step` that is not finite or below 1 us.
    pub fn set_max_step(&mut self, max_step: Option<f64>) -> Result<(), StepError> {
        self.control.set_max_step(max_step)
    }
    /// The controllers.
    pub fn control(&self) -> &VehicleControl {
        &self.control
    }
    /// The layout: gear slots and names.
    pub fn layout(&self) -> &Layout {
        &self.control.layout
    }
    /// The outputs of the last step.
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }
    /// Events of the last step.
    pub fn events(&self) -> &[VehicleEvent] {
        &self.control.events
    }
    /// See [`VehicleControl::set_wheel_contact`].
    pub fn set_wheel_contact(&mut self, k: usize, ground_speed: f64, ground_acceleration: f64, load: f64) {
        self.control.set_wheel_contact(k, ground_speed, ground_acceleration, load);
    }
    /// See [`VehicleControl::set_chassis_contact`].
    pub fn set_chassis_contact(&mut self, k: usize, contact: &WheelContact) -> Result<(), ContactRejected> {
        self.control.set_chassis_contact(k, contact)
    }
    /// See [`VehicleControl::wheel_forces`].
    pub fn wheel_forces(&self, k: usize) -> WheelForces {
        self.control.wheel_forces(k)
    }
    /// See [`VehicleControl::wheel_contact`].
    pub fn wheel_contact(&self, k: usize) -> WheelContact {
        self.control.wheel_contact(k)
    }
    /// See [`VehicleControl::set_surface_friction`].
    pub fn set_surface_friction(&mut self, k: usize, factor: f64) {
        self.control.set_surface_friction(k, factor);
    }
    /// The engine controller state.
    pub fn ecu(&self) -> &Ecu {
        &self.control.ecu
    }
    /// Gear whose dogs are fully in, 0 if none.
    pub fn engaged_gear(&self) -> i32 {
        self.control.engaged_gear()
    }
    /// Mode of the driver's clutch, or of an automatic's lock-up clutch.
    pub fn clutch_mode(&self) -> Option<FrictionMode> {
        self.control.clutch_mode(&self.sim)
    }
    /// Energy the synchroniser of `gear` has dissipated since the start, J (`None` for a gear
    /// without one, or an automatic).
    pub fn synchro_energy(&self, gear: i32) -> Option<f64> {
        self.control.synchro_energy(gear)
    }
    /// The automatic's transmission controller, if the vehicle has one.
    pub fn tcu(&self) -> Option<&crate::automatic::Tcu> {
        self.control.tcu()
    }

    /// See [`VehicleControl::set_road_speed`].
    pub fn set_road_speed(&mut self, speed: f64) -> Result<Vec<StateAdjustment>, StateWriteError> {
        self.control.set_road_speed(&mut self.sim, &mut self.telemetry, speed)
    }

    /// Applies new element parameters in place (see [`Simulation::update_parameters`]): the
    /// clock, the motion and every controller's state are kept. `spec` is the vehicle's network
    /// ([`Layout::spec`]) with other values: a final drive ratio, a clutch's `fn_max`, an
    /// inertia. The controllers keep the description they were built with.
    pub fn update_parameters(&mut self, spec: &crate::NetworkSpec) -> Result<(), UpdateError> {
        self.sim.update_parameters(spec)?;
        self.control.parameters_updated(spec);
        Ok(())
    }

    /// Everything the next step depends on (the solver's state and caches, every controller,
    /// the clock), to restore later with [`Vehicle::restore`]: a rollback, a save game, a
    /// checkpoint. See [`VehicleSnapshot`].
    pub fn snapshot(&self) -> VehicleSnapshot {
        self.control.snapshot(&self.sim, &self.telemetry)
    }

    /// Puts the vehicle back in the state of `snapshot`: the steps that follow are bit for bit
    /// those that followed the snapshot. Refused, with the vehicle unchanged, for a snapshot of
    /// another description (another spec or road, or other parameters after
    /// [`Vehicle::update_parameters`]) or a damaged one. The events of the last step are empty
    /// until the next step.
    pub fn restore(&mut self, snapshot: &VehicleSnapshot) -> Result<(), SnapshotError> {
        self.control.restore(&mut self.sim, &mut self.telemetry, snapshot)
    }

    /// The field each run of a snapshot's words belongs to (see [`VehicleControl::state_layout`]).
    #[doc(hidden)]
    pub fn state_layout(&self) -> Vec<(usize, &'static str)> {
        self.control.state_layout(&self.sim, &self.telemetry)
    }

    /// Advances the vehicle by `dt` seconds with the driver's `input`: controllers, the coupled
    /// solve, heat and telemetry (see the module docs for the order).
    pub fn step(&mut self, input: &DriverInput, dt: f64) -> Result<(), StepError> {
        self.control.step(&mut self.sim, &mut self.telemetry, input, dt)
    }

    /// Hints the processor to bring the state this vehicle's next step reads toward the cache,
    /// and returns at once. A fleet calls it on the next vehicle before it steps this one, so
    /// that the next vehicle's state arrives while this one computes (see the performance
    /// notes). It changes no result; where the processor has no such hint it does nothing.
    pub fn prefetch(&self) {
        self.control.prefetch(&self.sim);
    }

    /// One stage of [`Vehicle::prefetch`] (see [`crate::prefetch::STAGES`]): 0 the vehicle's own
    /// bytes, 1 the buffers they point to, 2 the buffers those point to. A fleet runs stage
    /// `STAGES - j` on the vehicle `j` places ahead, so that each stage reads only lines the
    /// stage before brought in. Changes no result.
    pub fn prefetch_stage(&self, stage: usize) {
        if stage == 0 {
            // The telemetry record, written whole by the step (the controllers' and the
            // simulation's own bytes are theirs to hint).
            crate::prefetch::value(&self.telemetry);
        }
        self.control.prefetch_stage(&self.sim, stage);
    }
}

impl VehicleControl {
    /// Hints the state the next step of these controllers and `sim` reads toward the cache
    /// ([`Vehicle::prefetch`]). Changes no result.
    pub fn prefetch(&self, sim: &Simulation) {
        for stage in 0..crate::prefetch::STAGES {
            self.prefetch_stage(sim, stage);
        }
    }

    /// One stage of [`VehicleControl::prefetch`], `sim`'s with it ([`Vehicle::prefetch_stage`]).
    pub fn prefetch_stage(&self, sim: &Simulation, stage: usize) {
        use crate::prefetch::{slice, value};
        match (stage, &self.trans) {
            (0, _) => value(self),
            (1, Trans::Manual(m)) => {
                slice(&self.events);
                value(&**m);
            }
            (1, Trans::Automatic(a)) => {
                slice(&self.events);
                value(&**a);
            }
            (2, Trans::Manual(m)) => m.prefetch_buffers(),
            (2, Trans::Automatic(a)) => a.tcu.prefetch_buffers(),
            _ => {}
        }
        sim.prefetch_stage(stage);
    }

    /// Controllers for `sim`, which must have been built from `layout` (of `spec`, on `road`):
    /// resolves every element and input the controllers use and writes the start inputs.
    ///
    /// # Panics
    /// When `sim` lacks an element or input of the layout (it was built from something else).
    /// `spec` and `layout` may be shared with other vehicles ([`build::shared`]).
    pub fn new(
        spec: impl Into<std::sync::Arc<VehicleSpec>>,
        layout: impl Into<std::sync::Arc<Layout>>,
        road: Road,
        sim: &Simulation,
    ) -> Self {
        let (spec, layout) = (spec.into(), layout.into());
        let net = sim.network();
        // The layout names every element and input it uses; a miss is a bug in `build`.
        let w = |p: &str| -> [usize; 4] { WHEELS.map(|n| find(net, &format!("{p}_{n}"))) };
        let wi = |p: &str, s: &str| -> [InputId; 4] { WHEELS.map(|n| id(sim, &format!("{p}_{n}.{s}"))) };
        let ids = Ids {
            engine: find(net, "engine"),
            engine_torque: find(net, "engine_torque"),
            output: find(net, "output"),
            body: (road == Road::Body).then(|| find(net, "body")),
            drive: WHEELS.map(|n| {
                let hs = format!("half_shaft_{n}");
                let hub = format!("hub_{n}");
                net.elements.iter().position(|e| e.name == hs || e.name == hub)
            }),
            wheels: w("wheel"),
            tyres: w("tyre"),
            brakes: w("brake"),
            throttle: id(sim, "engine.throttle"),
            starter: id(sim, "starter.torque"),
            grade: (road == Road::Body).then(|| id(sim, "grade.force")),
            ground_in: (road == Road::External).then(|| wi("ground", "speed")),
            chassis: (road == Road::Chassis).then(|| ChassisIds {
                chassis: find(net, "chassis"),
                force_in: id(sim, "chassis.force"),
                speed_in: wi("ground", "speed"),
                mass: [0, 1, 2, 3].map(|k| build::chassis_mass(&spec.body, k)),
                total: spec.body.mass,
                kappa_peak: spec.wheels.tyre.peak_slip(),
            }),
            brake_in: wi("brake", "command"),
            load_in: wi("tyre", "load"),
        };
        let trans = match (&spec.clutch, &spec.gearbox, &spec.automatic) {
            (Some(cl), Some(gb), _) => Trans::Manual(Box::new(Manual::new(cl, gb, &layout, net, sim))),
            (_, _, Some(at)) => Trans::Automatic(Box::new(AutoControl::new(at, &layout, &spec.engine, sim))),
            _ => panic!("vehicle spec has no transmission (it was not validated)"),
        };
        let fingerprint = crate::snapshot::fingerprint(&format!("{spec:?}{road:?}"));
        Self {
            last_valid: [0.0; 5],
            rejecting: [false; 5],
            backup: Vec::new(),
            fingerprint,
            trans,
            ecu: Ecu::new(&spec.engine),
            accel: 0.0,
            fuel: 0.0,
            events: Vec::with_capacity(EVENTS_PER_STEP),
            last_loads: [0.0; 4],
            slope: (0.0, 0.0, 1.0),
            surface: [1.0; 4],
            contact: [(0.0, 0.0, 0.0); 4],
            distance: 0.0,
            chassis: ChassisState::default(),
            controllers: Controllers::default(),
            max_step: f64::INFINITY,
            now: sim.time(),
            spec,
            layout,
            ids,
        }
    }

    /// Writes the start inputs, and the telemetry into `tel` from its defaults (called once by
    /// [`Vehicle`]; an ECS calls it when its simulation is (re)built).
    pub fn start(&mut self, sim: &mut Simulation, tel: &mut Telemetry) {
        // (New controllers, a new record: the fields a transmission does not fill stay at
        // their defaults.)
        *tel = Telemetry::default();
        self.apply_static_inputs(sim);
        self.update_telemetry(sim, tel, 0.0, 0.0, 0.0);
    }

    /// The description.
    pub fn spec(&self) -> &VehicleSpec {
        &self.spec
    }
    /// Which built-in controllers run.
    pub fn controllers(&self) -> Controllers {
        self.controllers
    }
    /// Turns built-in controllers off or on (see [`Controllers`]), from the next step on.
    pub fn set_controllers(&mut self, controllers: Controllers) {
        self.controllers = controllers;
    }
    /// The driveline's own longest step, s, if it has one ([`VehicleControl::set_max_step`]).
    pub fn max_step(&self) -> Option<f64> {
        self.max_step.is_finite().then_some(self.max_step)
    }
    /// Gives the driveline a rate of its own inside the caller's step: from the next step on,
    /// a step longer than `max_step` seconds is taken as equal sub-steps of at most that length,
    /// each the whole chain of control, actuation and the coupled solve, with the driver's
    /// input (and a [`Road::Chassis`] game's contact) held over the whole step. `Some(1e-3)` runs
    /// the driveline at 1 kHz inside a game's 60 Hz physics step (17 sub-steps of 0.98 ms);
    /// `None` (the default) takes each step in one solve outside shifts (see
    /// [`VehicleControl::step`]). Configuration, not state: not part of a snapshot.
    ///
    /// # Errors
    /// [`StepError::BadStep`] for a `max_step` that is not finite or below 1 us (the setting
    /// is left as it was).
    pub fn set_max_step(&mut self, max_step: Option<f64>) -> Result<(), StepError> {
        match max_step {
            None => self.max_step = f64::INFINITY,
            Some(h) if h.is_finite() && h >= MIN_MAX_STEP => self.max_step = h,
            Some(h) => return Err(StepError::BadStep(h)),
        }
        Ok(())
    }
    /// The layout: gear slots and names.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// Events of the last step.
    pub fn events(&self) -> &[VehicleEvent] {
        &self.events
    }
    /// The automatic's transmission controller, if the vehicle has one.
    pub fn tcu(&self) -> Option<&crate::automatic::Tcu> {
        match &self.trans {
            Trans::Automatic(a) => Some(&a.tcu),
            Trans::Manual(_) => None,
        }
    }
    /// External road ([`Vehicle::new_external`]): the speed of the ground under wheel `k` along
    /// the wheel's heading, m/s, its acceleration, m/s^2 (the game's chassis acceleration; the
    /// ground speed ramps with it through the step, so the tyre forces include the torque that
    /// accelerates the wheels and the driveline), and the normal load, N, for the next step.
    /// Non-finite values are ignored (the last good ones stay); loads below 0 are 0 (wheel in
    /// the air).
    pub fn set_wheel_contact(&mut self, k: usize, ground_speed: f64, ground_acceleration: f64, load: f64) {
        if k < 4 {
            if ground_speed.is_finite() {
                self.contact[k].0 = ground_speed;
            }
            if ground_acceleration.is_finite() {
                self.contact[k].2 = ground_acceleration;
            }
            if load.is_finite() {
                self.contact[k].1 = load.max(0.0);
            }
        }
    }

    /// Sets the vehicle moving at `speed` m/s (negative: backwards) before the next step, for
    /// a reset or a teleport: the body at `speed` (on an external road, the grounds under the
    /// wheels), every wheel rolling without slip (`w = speed / R`), and the driveline behind
    /// them following through whatever is locked, geared or sprung to them at the time (a
    /// locked clutch and an engaged gear take the engine along, with the torsional damper and
    /// the dogs at rest relative to themselves; an open clutch, a sliding one or a torque
    /// converter leaves the engine at its speed). The state is written with
    /// [`Simulation::write_state_following`] and [`crate::Follow::Elastic`], which says how a
    /// conflict is resolved; the values that
    /// could not be taken as written are returned. The acceleration the load transfer reads
    /// starts from zero.
    pub fn set_road_speed(
        &mut self,
        sim: &mut Simulation,
        tel: &mut Telemetry,
        speed: f64,
    ) -> Result<Vec<StateAdjustment>, StateWriteError> {
        if !speed.is_finite() {
            return Err(StateWriteError::NotFinite { element: "body".into(), what: "speed", value: speed });
        }
        let radius = |k: usize| {
            let name = format!("tyre_{}", WHEELS[k]);
            self.layout.spec.elements.iter().find(|e| e.name == name).map_or(self.spec.wheels.radius, |e| {
                match e.kind {
                    crate::ElementKind::Tyre { radius, .. } => radius,
                    _ => self.spec.wheels.radius,
                }
            })
        };
        let mut writes: Vec<StateWrite> = (0..4)
            .map(|k| StateWrite { element: self.ids.wheels[k], angle: None, speed: Some(speed / radius(k)) })
            .collect();
        if let Some(b) = self.ids.body {
            writes.push(StateWrite { element: b, angle: None, speed: Some(speed) });
        } else if let Some(c) = self.ids.chassis {
            writes.push(StateWrite { element: c.chassis, angle: None, speed: Some(speed) });
            self.chassis.set_speed(speed);
        } else {
            for c in &mut self.contact {
                c.0 = speed;
                c.2 = 0.0;
            }
        }
        let report = sim.write_state_following(&writes, crate::Follow::Elastic)?;
        self.accel = 0.0;
        let (throttle, reduction, clamp) = (tel.throttle, tel.torque_reduction, tel.clutch_engagement);
        self.update_telemetry(sim, tel, throttle, reduction, clamp);
        Ok(report)
    }

    /// [`Road::Chassis`]: what the game's chassis says of wheel `k` ([`WHEELS`] order) before
    /// the next step; held until the next write (see [`chassis`]). A non-finite field keeps its
    /// last valid value and is named in the error (the others are taken); the load is clamped to
    /// >= 0 and the friction to [0, 10]. On another road, or for `k >= 4`, nothing is written.
    pub fn set_chassis_contact(&mut self, k: usize, contact: &WheelContact) -> Result<(), ContactRejected> {
        if k < 4 && self.ids.chassis.is_some() { self.chassis.write(k, contact) } else { Ok(()) }
    }

    /// [`Road::Chassis`]: the tyre forces on the chassis and the wheel's slip after the last step
    /// (defaults on another road, or for `k >= 4`).
    pub fn wheel_forces(&self, k: usize) -> WheelForces {
        self.chassis.wheels.get(k).map_or_else(WheelForces::default, |w| w.forces)
    }

    /// [`Road::Chassis`]: wheel `k`'s contact as last written (finite values only).
    pub fn wheel_contact(&self, k: usize) -> WheelContact {
        self.chassis.wheels.get(k).map_or_else(WheelContact::default, |w| w.contact)
    }

    /// Road friction under wheel `k` ([`WHEELS`] order) relative to the tyre's own (1 = dry
    /// road as the tyre is tuned, 0.1 = ice). Values are clamped to [0, 10]; NaN is ignored.
    pub fn set_surface_friction(&mut self, k: usize, factor: f64) {
        if k < 4 && !factor.is_nan() {
            self.surface[k] = factor.clamp(0.0, 10.0);
        }
    }

    /// The engine controller state.
    pub fn ecu(&self) -> &Ecu {
        &self.ecu
    }

    fn push(&mut self, kind: VehicleEventKind) {
        push_event(&mut self.events, self.now, kind);
    }

    /// Tyre loads and the clutch before the first step.
    fn apply_static_inputs(&mut self, sim: &mut Simulation) {
        let loads = self.loads(0.0, 1.0, 0.0);
        if self.ids.ground_in.is_some() {
            // A game sets the loads; until it does, the static ones.
            for k in 0..4 {
                self.contact[k].1 = loads[k];
            }
        }
        if self.ids.chassis.is_some() {
            for k in 0..4 {
                self.chassis.wheels[k].contact.load = loads[k];
            }
        }
        self.last_loads = loads;
        for k in 0..4 {
            set(sim, self.ids.load_in[k], loads[k]);
        }
        match &mut self.trans {
            Trans::Manual(m) => set(sim, m.ids.clutch_force, 1.0),
            Trans::Automatic(a) => a.start(sim),
        }
    }

    /// Normal loads per wheel at a grade angle of sine `sin` and cosine `cos` and acceleration `a` (load transfer
    /// `m a h / L`, split evenly left and right), N.
    fn loads(&self, sin: f64, cos: f64, a: f64) -> [f64; 4] {
        let b = &self.spec.body;
        let weight = b.mass * G * cos;
        let transfer = b.mass * (a + G * sin) * b.cg_height / b.wheelbase;
        let front = (b.front_weight * weight - transfer).max(0.0) / 2.0;
        let rear = ((1.0 - b.front_weight) * weight + transfer).max(0.0) / 2.0;
        [front, front, rear, rear]
    }

    /// Body speed, or the mean ground speed on an external road or a chassis, m/s.
    fn vehicle_speed(&self, sim: &Simulation) -> f64 {
        match (self.ids.body, &self.ids.chassis) {
            (Some(b), _) => sim.body_state(b).map_or(0.0, |s| s.1),
            (None, Some(c)) => sim.body_state(c.chassis).map_or(0.0, |s| s.1),
            (None, None) => self.contact.iter().map(|c| c.0).sum::<f64>() / 4.0,
        }
    }

    /// Gear engaged: a manual box's gear whose dogs are fully in, an automatic's gear whose
    /// elements are applied; 0 if none.
    pub fn engaged_gear(&self) -> i32 {
        match &self.trans {
            Trans::Manual(m) => m.engaged_gear(&self.layout),
            Trans::Automatic(a) => a.tcu.gear(),
        }
    }

    /// Energy the synchroniser of `gear` has dissipated since the start, J (`None` for a gear
    /// without one, or an automatic).
    pub fn synchro_energy(&self, gear: i32) -> Option<f64> {
        let Trans::Manual(m) = &self.trans else { return None };
        let k = self.layout.gears.iter().position(|g| g.gear == gear)?;
        m.ids.synchros[k].map(|_| m.synchro_energy[k])
    }

    /// Mode of the driver's clutch, or of an automatic's lock-up clutch.
    pub fn clutch_mode(&self, sim: &Simulation) -> Option<FrictionMode> {
        match &self.trans {
            Trans::Manual(m) => sim.element_mode(m.ids.clutch),
            Trans::Automatic(a) => sim.element_mode(a.ids.lockup),
        }
    }

    /// Writes the telemetry record `t` in place: a transmission fills the same fields at every
    /// step, and the others keep their defaults.
    fn update_telemetry(&self, sim: &Simulation, t: &mut Telemetry, throttle: f64, reduction: f64, clamp: f64) {
        let engaged_gear = self.engaged_gear();
        let speed = self.vehicle_speed(sim);
        let ids = &self.ids;
        t.time = sim.time();
        t.engine_rpm = sim.body_state(ids.engine).map_or(0.0, |s| s.1) / RPM;
        t.engine_torque = sim.element_torque(ids.engine_torque);
        t.throttle = throttle;
        t.running = self.ecu.running;
        t.clutch_engagement = clamp;
        t.engaged_gear = engaged_gear;
        t.torque_reduction = reduction;
        t.speed = speed;
        t.acceleration = self.accel;
        t.distance = ids.body.and_then(|b| sim.body_state(b)).map_or(self.distance, |s| s.0);
        t.fuel_used = self.fuel;
        match &self.trans {
            Trans::Manual(m) => {
                t.clutch_slip = sim.element_relative_speed(m.ids.clutch).unwrap_or(0.0);
                t.clutch_torque = sim.element_torque(m.ids.clutch);
                t.clutch_temperature = m.temperature;
                t.clutch_power = sim.element_dissipation(m.ids.clutch);
                t.selected_gear = m.selected;
                for (k, s) in m.sleeves().iter().take(6).enumerate() {
                    t.sleeves[k] = s.z;
                }
            }
            Trans::Automatic(a) => a.telemetry(sim, t, self.controllers),
        }
        for k in 0..4 {
            t.wheel_speed[k] = sim.body_state(ids.wheels[k]).map_or(0.0, |s| s.1);
            t.tyre_force[k] = sim.element_torque(ids.tyres[k]);
            t.tyre_slip[k] = sim.element_relative_speed(ids.tyres[k]).unwrap_or(0.0);
            t.brake_torque[k] = sim.element_torque(ids.brakes[k]);
            t.drive_torque[k] = ids.drive[k].map_or(0.0, |e| -sim.element_torque(e));
        }
        t.tyre_load = self.last_loads;
    }
}

/// Records an event; its step's buffer never grows: the last of its [`EVENTS_PER_STEP`] places
/// counts the events past the others ([`VehicleEventKind::EventsDropped`]).
fn push_event(events: &mut Vec<VehicleEvent>, time: f64, kind: VehicleEventKind) {
    if events.len() + 1 < EVENTS_PER_STEP {
        events.push(VehicleEvent { time, kind });
    } else if let Some(VehicleEvent { kind: VehicleEventKind::EventsDropped { count }, .. }) = events.last_mut() {
        *count = count.saturating_add(1);
    } else {
        events.push(VehicleEvent { time, kind: VehicleEventKind::EventsDropped { count: 1 } });
    }
}

/// Position of the key path in `text`: each key is searched after the previous one.
fn locate(text: &str, path: &[&str]) -> (usize, usize) {
    let mut at = 0;
    let mut pos = (1, 1);
    for key in path {
        if let Some((l, c, a)) = position_of(text, &format!("{key}:"), at) {
            pos = (l, c);
            at = a + 1;
        }
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_step_buffer_counts_what_it_drops_and_never_grows() {
        let mut events = Vec::with_capacity(EVENTS_PER_STEP);
        let room = events.capacity();
        for k in 0..EVENTS_PER_STEP + 4 {
            push_event(&mut events, k as f64, VehicleEventKind::ShiftRefused { gear: k as i32 });
        }
        assert_eq!(events.len(), EVENTS_PER_STEP);
        assert_eq!(events.capacity(), room, "the buffer grew");
        // The first EVENTS_PER_STEP - 1 are kept in order; the 5 after them are counted.
        assert!(events[..EVENTS_PER_STEP - 1].iter().enumerate().all(|(k, e)| e.time == k as f64));
        assert_eq!(events[EVENTS_PER_STEP - 1].kind, VehicleEventKind::EventsDropped { count: 5 });
    }
}

//! The vehicle description: what `assets/vehicles/*.ron` files deserialise into.
//!
//! Every parameter is SI unless its name says otherwise (`*_rpm`, `*_deg`). Defaults are listed
//! on each field; [`VehicleSpec::validate`] says what is wrong and what is allowed, and
//! `driveline check` places the message at the offending key (`file:line:col`).
//!
//! # A complete file
//! The smallest useful vehicle: every section, the required keys, defaults for the rest (the
//! shipped cars in `assets/vehicles/` set many more, with their sources).
//!
//! ```
//! # use driveline_core::Vehicle;
//! let text = r#"
//! Vehicle(
//!     name: "small car",
//!     engine: (
//!         map: FullAndClosed(
//!             rpm:    [500.0, 2000.0, 4000.0, 6000.0],
//!             full:   [100.0, 150.0,  160.0,  140.0],
//!             closed: [-8.0,  -37.0,  -87.0,  -151.0],
//!         ),
//!         inertia: 0.15,
//!         idle_rpm: 800.0,
//!         stall_rpm: 350.0,
//!         rev_limiter: (rpm: 6200.0),
//!     ),
//!     clutch: (mu: [(0.0, 0.3)], outer_radius: 0.11, inner_radius: 0.075, clamp_force: 5000.0),
//!     gearbox: (
//!         kind: Manual,
//!         ratios: [3.5, 2.0, 1.3, 1.0, 0.8],
//!         reverse: Some(-3.2),
//!         dog: (tooth_height: 0.008, min_overlap: 0.002),
//!         synchro: Some((blocker_position: 0.0015)),
//!         linkage: (mass: 0.8),
//!         shift_force: 400.0,
//!     ),
//!     driveline: (drive: Front, final_drive: 4.1, differential: Open),
//!     wheels: (radius: 0.3, inertia: 1.0, front_brake: 2000.0, rear_brake: 1000.0),
//!     body: (mass: 1100.0, wheelbase: 2.5, cg_height: 0.5, front_weight: 0.6, drag_area: 0.65),
//! )"#;
//! let spec = Vehicle::parse(text, "small.ron").unwrap();
//! let car = Vehicle::from_text(spec, text, "small.ron").unwrap();
//! assert_eq!(car.layout().gears.len(), 6);
//! // A mistake is placed at its key:
//! let bad = text.replace("final_drive: 4.1", "final_drive: 0.0");
//! let err = Vehicle::from_text(Vehicle::parse(&bad, "bad.ron").unwrap(), &bad, "bad.ron").err().unwrap();
//! assert!(err.to_string().starts_with("bad.ron:25:31: driveline.final_drive"), "{err}");
//! ```
//!
//! # Sections
//! - `engine`: [`EngineSpec`]: map, inertia, idle/stall/start speeds, idle PI, rev limiter,
//!   starter curve, optional fuel map.
//! - `clutch`: [`ClutchSpec`]: friction, geometry, clamp force and pedal characteristic,
//!   torsional damper, heat.
//! - `gearbox`: [`GearboxSpec`]: kind, ratios, dogs ([`DogSpec`]), synchronisers
//!   ([`SynchroSpec`]), linkage ([`LinkageSpec`]), shift force, shifter options.
//! - `automatic` (instead of `clutch` and `gearbox`): [`AutomaticSpec`]: a planetary gearbox
//!   file, the torque converter and lock-up clutch, park pawl, shift schedule, shift control
//!   and element heat (see [`crate::automatic`]).
//! - `driveline`: [`DrivelineLayout`]: driven axles, final drive, differentials.
//! - `wheels`: [`WheelSpec`]: radius, inertia, Magic Formula, rolling resistance, brakes.
//! - `body`: [`BodySpec`]: mass, wheelbase, centre of gravity, weight split, drag.

use crate::automatic::AutomaticSpec;
use crate::tyre::{CombinedSlip, MagicFormula};
use crate::{Table1D, TorqueMapSpec};
use serde::{Deserialize, Serialize};

/// A whole vehicle: engine, clutch, gearbox, final drive and differentials, wheels and body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename = "Vehicle")]
pub struct VehicleSpec {
    /// Display name.
    pub name: String,
    /// Where the numbers come from (name the public sources).
    #[serde(default)]
    pub source: String,
    /// The engine.
    pub engine: EngineSpec,
    /// The driver's friction clutch (manual and sequential gearboxes).
    #[serde(default)]
    pub clutch: Option<ClutchSpec>,
    /// A manual or sequential gearbox (with `clutch`).
    #[serde(default)]
    pub gearbox: Option<GearboxSpec>,
    /// A planetary automatic with torque converter, instead of `clutch` and `gearbox`.
    #[serde(default)]
    pub automatic: Option<AutomaticSpec>,
    /// Final drive, differentials and which axles are driven.
    pub driveline: DrivelineLayout,
    /// Wheels, tyres and brakes.
    pub wheels: WheelSpec,
    /// Body and road load.
    pub body: BodySpec,
}

/// Engine: torque map, inertia and the engine controller's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSpec {
    /// Torque over throttle and speed; the closed-throttle row is the friction and pumping loss.
    pub map: TorqueMapSpec,
    /// Crankshaft and flywheel inertia, kg m^2 (> 0).
    pub inertia: f64,
    /// Idle speed target, rpm (> stall speed, inside the map).
    pub idle_rpm: f64,
    /// Below this speed the engine stalls: no combustion until restarted, rpm (>= 0).
    pub stall_rpm: f64,
    /// The engine runs again once the starter has spun it above this speed, rpm. Default: the
    /// stall speed plus 100 rpm.
    #[serde(default)]
    pub start_rpm: Option<f64>,
    /// Idle speed controller.
    #[serde(default)]
    pub idle: IdleControllerSpec,
    /// Rev limiter (fuel cut).
    pub rev_limiter: RevLimiterSpec,
    /// Starter motor torque at the crankshaft over engine speed `[(rpm, N m)]`. Default: 80 N m at
    /// rest falling to 0 at 400 rpm.
    #[serde(default = "default_starter")]
    pub starter: Table1D,
    /// Optional fuel rate map for drive-cycle fuel use.
    #[serde(default)]
    pub fuel: Option<FuelMapSpec>,
}

fn default_starter() -> Table1D {
    Table1D::new(vec![(0.0, 80.0), (400.0, 0.0)]).expect("static table")
}

/// PI idle controller acting through the throttle: `theta_idle = kp e + ki integral(e)`, with
/// `e = (idle - n) / idle` the relative speed error, clamped to `[0, max_throttle]` with
/// conditional integration (no wind-up).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdleControllerSpec {
    /// Proportional gain, throttle per unit relative error (>= 0). Default 0.5.
    pub kp: f64,
    /// Integral gain, throttle per unit relative error and second (>= 0). Default 2.
    pub ki: f64,
    /// Largest throttle the controller may add, in [0, 1]. Default 0.3.
    pub max_throttle: f64,
}

impl Default for IdleControllerSpec {
    fn default() -> Self {
        Self { kp: 0.5, ki: 2.0, max_throttle: 0.3 }
    }
}

/// Fuel cut above `rpm`; fuel returns once the speed is `hysteresis_rpm` below and the cut has
/// lasted `hold` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevLimiterSpec {
    /// Cut-in speed, rpm (> idle).
    pub rpm: f64,
    /// Speed drop before fuel returns, rpm (>= 0). Default 150.
    #[serde(default = "default_hyst")]
    pub hysteresis_rpm: f64,
    /// Shortest cut, s (>= 0). Default 0.02.
    #[serde(default = "default_hold")]
    pub hold: f64,
}

fn default_hyst() -> f64 {
    150.0
}
fn default_hold() -> f64 {
    0.02
}

/// Fuel mass rate over speed and brake torque, bilinear; negative torques use the first column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FuelMapSpec {
    /// Speeds, rpm, increasing.
    pub rpm: Vec<f64>,
    /// Torques, N m, increasing.
    pub torque: Vec<f64>,
    /// `rate[i][j]` at `rpm[i]`, `torque[j]`, g/s (>= 0).
    pub grams_per_s: Vec<Vec<f64>>,
    /// Fuel density, g/L (> 0). Default 745 (petrol; diesel is about 832).
    #[serde(default = "default_density")]
    pub density: f64,
}

/// The driver's dry clutch: geometry, diaphragm characteristic, optional torsional damper and
/// thermal model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClutchSpec {
    /// Kinetic friction coefficient over slip speed `[(rad/s, mu)]` (dry: 0.2-0.4).
    pub mu: Table1D,
    /// Static / kinetic ratio (>= 1). Default 1.2.
    #[serde(default = "default_peak")]
    pub peak: f64,
    /// Friction surfaces N (a single plate has 2).
    #[serde(default = "two")]
    pub surfaces: u32,
    /// Outer friction radius, m.
    pub outer_radius: f64,
    /// Inner friction radius, m (< outer).
    pub inner_radius: f64,
    /// Clamp force of the diaphragm spring with the pedal up, N (> 0).
    pub clamp_force: f64,
    /// Pedal travel (0 up, 1 floored) at which the plate stops transmitting torque: the bite
    /// point seen from the released side, in (full_engagement, 1]. Default 0.6.
    #[serde(default = "default_bite")]
    pub bite_point: f64,
    /// Pedal travel below which the full clamp force acts, in [0, bite_point). Default 0.2.
    #[serde(default = "default_full")]
    pub full_engagement: f64,
    /// Cushion-spring progression exponent of the clamp force between the two (>= 1). Default 2.
    #[serde(default = "two_f")]
    pub progression: f64,
    /// Clutch disc inertia (with the gearbox input shaft), kg m^2 (> 0). Default 0.02.
    #[serde(default = "default_disc")]
    pub disc_inertia: f64,
    /// Optional torsional damper springs between the disc and the input shaft.
    #[serde(default)]
    pub damper: Option<TorsionDamperSpec>,
    /// Thermal model.
    #[serde(default)]
    pub thermal: ThermalSpec,
}

fn default_peak() -> f64 {
    1.2
}
fn two() -> u32 {
    2
}
fn two_f() -> f64 {
    2.0
}
fn default_bite() -> f64 {
    0.6
}
fn default_full() -> f64 {
    0.2
}
fn default_disc() -> f64 {
    0.02
}

/// Torsional damper springs in the clutch disc.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TorsionDamperSpec {
    /// Stiffness, N m/rad (> 0).
    pub stiffness: f64,
    /// Damping (friction washers), N m s/rad (>= 0).
    pub damping: f64,
}

/// Clutch heat: `m c dT/dt = P_slip - h (T - T_ambient)`, with an optional fade of mu.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ThermalSpec {
    /// Heat capacity `m c` of plate and flywheel face, J/K (> 0). Default 4000 (about 8 kg of
    /// cast iron).
    pub heat_capacity: f64,
    /// Cooling conductance `h`, W/K (>= 0). Default 15.
    pub cooling: f64,
    /// Ambient and start temperature, deg C. Default 25.
    pub ambient: f64,
    /// Friction factor over temperature `[(deg C, factor)]`, multiplying mu. Default none (1).
    pub fade: Option<Table1D>,
}

impl Default for ThermalSpec {
    fn default() -> Self {
        Self { heat_capacity: 4000.0, cooling: 15.0, ambient: 25.0, fade: None }
    }
}

/// Gearbox kind and its parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GearboxSpec {
    /// Manual H-pattern with synchronisers, or sequential dog box.
    pub kind: GearboxKind,
    /// Forward ratios, input / output speed, first gear first (> 0, decreasing).
    pub ratios: Vec<f64>,
    /// Reverse ratio (< 0), if the box has one.
    #[serde(default)]
    pub reverse: Option<f64>,
    /// Inertia of each idler gear on the output shaft, kg m^2 (> 0). Default 0.002.
    #[serde(default = "default_idler")]
    pub idler_inertia: f64,
    /// Output shaft inertia, kg m^2 (> 0). Default 0.01.
    #[serde(default = "default_shaft")]
    pub output_inertia: f64,
    /// The dog clutches (every gear has one).
    pub dog: DogSpec,
    /// Synchronisers (manual H-pattern boxes); `None` for a dog box.
    #[serde(default)]
    pub synchro: Option<SynchroSpec>,
    /// Shift linkage of each sleeve.
    pub linkage: LinkageSpec,
    /// Driver or actuator force on the linkage, N (> 0).
    pub shift_force: f64,
    /// Shift controller options.
    #[serde(default)]
    pub shifter: ShifterSpec,
}

fn default_idler() -> f64 {
    0.002
}
fn default_shaft() -> f64 {
    0.01
}

/// Gearbox topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GearboxKind {
    /// H-pattern: the driver picks any gear; sleeves with synchronisers.
    Manual,
    /// Sequential: up/down one gear at a time, an actuator moves the sleeves, ignition cut.
    Sequential,
}

/// Torque transmission model of the dog clutches (after the Simscape Driveline Dog Clutch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DogModel {
    /// Friction approximation: capacity grows with overlap; locks at full engagement and
    /// unlocks above `max_torque`. For fixed-step and hardware-in-the-loop use.
    Friction,
    /// Dynamic with backlash: ring-hub torsional spring and damper outside the backlash gap;
    /// the teeth must be aligned to engage.
    Backlash,
}

/// Dog clutch geometry and engagement limits (after the Simscape Driveline Dog Clutch; defaults are documented choices, no
/// public source gives them, see clutches_and_dogs.md section 5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DogSpec {
    /// Torque transmission model. Default Friction.
    #[serde(default = "default_dog_model")]
    pub model: DogModel,
    /// Number of dogs (teeth) on the ring (>= 1). Default 6.
    #[serde(default = "default_teeth")]
    pub teeth: u32,
    /// Tooth height h, m (> 0). Default 0.008.
    #[serde(default = "default_tooth")]
    pub tooth_height: f64,
    /// Ring-hub clearance when disengaged z_gap, m (> 0). Default 0.003.
    #[serde(default = "default_gap")]
    pub clearance: f64,
    /// Minimum tooth overlap h0 to carry torque, m (in (0, tooth_height)). Default 0.002.
    #[serde(default = "default_overlap")]
    pub min_overlap: f64,
    /// Largest relative speed at which the dogs can drop in, rad/s (> 0). Default 30.
    #[serde(default = "default_engage_speed")]
    pub max_engage_speed: f64,
    /// Friction model: torque above which a full engagement unlocks, N m (> 0). Default 5000.
    #[serde(default = "default_dog_torque")]
    pub max_torque: f64,
    /// Backlash model: ring-hub torsional stiffness, N m/rad (> 0). Default 2e5.
    #[serde(default = "default_dog_k")]
    pub stiffness: f64,
    /// Backlash model: ring-hub damping, N m s/rad (>= 0). Default 50.
    #[serde(default = "default_dog_d")]
    pub damping: f64,
    /// Backlash model: total angular free play delta, deg (>= 0, < 360/teeth). Default 20.
    #[serde(default = "default_backlash")]
    pub backlash_deg: f64,
    /// Mean radius of the dog faces, m (> 0): converts dog torque into the face friction that
    /// resists pulling a loaded dog out. Default 0.05.
    #[serde(default = "default_dog_r")]
    pub face_radius: f64,
    /// Friction coefficient of the dog faces (>= 0). Default 0.1.
    #[serde(default = "default_face_mu")]
    pub face_friction: f64,
}

fn default_dog_model() -> DogModel {
    DogModel::Friction
}
fn default_teeth() -> u32 {
    6
}
fn default_tooth() -> f64 {
    0.008
}
fn default_gap() -> f64 {
    0.003
}
fn default_overlap() -> f64 {
    0.002
}
fn default_engage_speed() -> f64 {
    30.0
}
fn default_dog_torque() -> f64 {
    5000.0
}
fn default_dog_k() -> f64 {
    2e5
}
fn default_dog_d() -> f64 {
    50.0
}
fn default_backlash() -> f64 {
    20.0
}
fn default_dog_r() -> f64 {
    0.05
}
fn default_face_mu() -> f64 {
    0.1
}

/// Cone synchroniser with blocker ring (clutches_and_dogs.md section 3). Cone torque
/// `T = mu F r_c / sin(alpha)`; the blocker holds the sleeve until the speeds match.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynchroSpec {
    /// Cone friction coefficient (in oil ~0.1; Modelica_TDL uses 0.3). Default 0.1.
    #[serde(default = "default_cone_mu")]
    pub mu: f64,
    /// Mean cone radius r_c, m (> 0). Default 0.035.
    #[serde(default = "default_cone_r")]
    pub cone_radius: f64,
    /// Cone half-angle alpha, deg (in (0, 45)). Default 6.5.
    #[serde(default = "default_cone_angle")]
    pub cone_angle_deg: f64,
    /// Sleeve travel at which the blocker ring presses the cone, m (in (0, dog clearance)).
    /// Default 0.0015.
    #[serde(default = "default_blocker")]
    pub blocker_position: f64,
    /// Relative speed below which the blocker indexes and lets the sleeve pass, rad/s (> 0).
    /// Default 0.5.
    #[serde(default = "default_index")]
    pub index_speed: f64,
}

fn default_cone_mu() -> f64 {
    0.1
}
fn default_cone_r() -> f64 {
    0.035
}
fn default_cone_angle() -> f64 {
    6.5
}
fn default_blocker() -> f64 {
    0.0015
}
fn default_index() -> f64 {
    0.5
}

/// Shift linkage dynamics of one sleeve (after the Simscape Driveline Dog Clutch): mass, viscous and Coulomb friction
/// (`tanh(4 v / v_th)`-smoothed), compliant end stops, detent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkageSpec {
    /// Moving mass of sleeve, fork and rail (reflected), kg (> 0).
    pub mass: f64,
    /// Viscous damping, N s/m (>= 0). Default 100 (the Simscape Driveline Dog Clutch's).
    #[serde(default = "default_visc")]
    pub damping: f64,
    /// Coulomb friction of the rail, N (>= 0). Default 5.
    #[serde(default = "default_coulomb")]
    pub coulomb: f64,
    /// Velocity threshold of the tanh smoothing, m/s (> 0). Default 0.01.
    #[serde(default = "default_vth")]
    pub v_threshold: f64,
    /// End-stop stiffness, N/m (> 0). Default 1e6 (the Simscape Driveline Dog Clutch's).
    #[serde(default = "default_stop_k")]
    pub stop_stiffness: f64,
    /// End-stop damping, N s/m (>= 0). Default 1000 (the Simscape Driveline Dog Clutch's).
    #[serde(default = "default_stop_d")]
    pub stop_damping: f64,
    /// Detent peak force holding neutral, N (>= 0). Default 20.
    #[serde(default = "default_detent")]
    pub detent_force: f64,
    /// Half-width of the detent around neutral, m (> 0). Default 0.001.
    #[serde(default = "default_detent_w")]
    pub detent_width: f64,
}

fn default_visc() -> f64 {
    100.0
}
fn default_coulomb() -> f64 {
    5.0
}
fn default_vth() -> f64 {
    0.01
}
fn default_stop_k() -> f64 {
    1e6
}
fn default_stop_d() -> f64 {
    1000.0
}
fn default_detent() -> f64 {
    20.0
}
fn default_detent_w() -> f64 {
    0.001
}

/// Shift controller options.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShifterSpec {
    /// Work the clutch automatically (gamepad drivers): for launches and stops (it bites as the
    /// engine pulls above idle and opens before a stall), and on H-pattern boxes for every
    /// shift. Default false.
    pub auto_clutch: bool,
    /// Blip the throttle on downshifts to match the engine to the new gear. Default false.
    pub auto_blip: bool,
    /// Sequential boxes: cut the ignition while a loaded dog is pulled out. Default true.
    pub ignition_cut: bool,
    /// Auto-clutch: time to let the pedal up after the new gear is in, s (> 0). Default 0.3.
    pub clutch_release_time: f64,
    /// Sequential boxes: give up a shift that has not completed after this time and return to
    /// neutral, s. Default 1.5. (An H-pattern driver keeps pushing.)
    pub timeout: f64,
}

impl Default for ShifterSpec {
    fn default() -> Self {
        Self { auto_clutch: false, auto_blip: false, ignition_cut: true, clutch_release_time: 0.3, timeout: 1.5 }
    }
}

/// Which axles are driven, through what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrivelineLayout {
    /// Driven axles.
    pub drive: Drive,
    /// Final drive ratio, output shaft / carrier speed (> 0).
    pub final_drive: f64,
    /// Axle differential of every driven axle.
    pub differential: DifferentialSpec,
}

/// Driven axles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Drive {
    /// Rear-wheel drive.
    Rear,
    /// Front-wheel drive.
    Front,
    /// All-wheel drive through a centre differential.
    All {
        /// Share of the drive torque sent to the front axle by the centre differential, (0, 1).
        front_share: f64,
        /// The centre differential.
        centre: DifferentialSpec,
    },
}

/// A differential.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum DifferentialSpec {
    /// Open (bevel gears: a planetary set with ratio 1, or the front share for a centre diff).
    Open,
    /// Both outputs locked together.
    Locked,
    /// Clutch-pack limited slip: locking torque `preload + ramp |T_in|`, where the ramp is
    /// `power_ramp` while the input torque drives the carrier forward and `coast_ramp` while it
    /// pulls it backward (engine braking going forward, or reversing under power: the flank
    /// the ramps bear on follows the torque) (1-way: coast 0; 1.5-way: coast < power; 2-way:
    /// equal).
    ClutchPack {
        /// Preload torque, N m (>= 0).
        preload: f64,
        /// Locking torque per input torque on power, (>= 0).
        power_ramp: f64,
        /// Locking torque per input torque on coast, (>= 0).
        coast_ramp: f64,
    },
    /// Viscous coupling between the outputs: `T = d (w_left - w_right)`.
    Viscous {
        /// Coefficient, N m s/rad (> 0).
        coefficient: f64,
    },
}

/// Wheels, tyres and brakes (every wheel alike; two per axle).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WheelSpec {
    /// Rolling radius, m (> 0).
    pub radius: f64,
    /// Wheel and tyre inertia, kg m^2 (> 0).
    pub inertia: f64,
    /// Magic Formula coefficients (longitudinal).
    #[serde(default)]
    pub tyre: MagicFormula,
    /// The lateral Magic Formula and the combined-slip weights, used on a game's chassis
    /// ([`crate::vehicle::Road::Chassis`]). Default [`CombinedSlip::default`].
    #[serde(default)]
    pub combined: CombinedSlip,
    /// Rolling resistance coefficient (>= 0). Default 0.012.
    #[serde(default = "default_crr")]
    pub rolling_resistance: f64,
    /// Largest brake torque of one front wheel, N m (>= 0).
    pub front_brake: f64,
    /// Largest brake torque of one rear wheel, N m (>= 0).
    pub rear_brake: f64,
    /// Static / kinetic ratio of the brakes (>= 1). Default 1.2.
    #[serde(default = "default_peak")]
    pub brake_peak: f64,
    /// Largest parking-brake torque of one rear wheel, N m (>= 0). Default 1500.
    #[serde(default = "default_park")]
    pub parking_brake: f64,
    /// Optional half-shaft torsional stiffness, N m/rad (> 0), with damping 1 % critical.
    #[serde(default)]
    pub half_shaft_stiffness: Option<f64>,
}

/// As derived, but `combined` only when it is not the default: a description's text (which
/// fingerprints its snapshots) is then the same whether or not its file names the field.
impl std::fmt::Debug for WheelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("WheelSpec");
        d.field("radius", &self.radius).field("inertia", &self.inertia).field("tyre", &self.tyre);
        if self.combined != CombinedSlip::default() {
            d.field("combined", &self.combined);
        }
        d.field("rolling_resistance", &self.rolling_resistance)
            .field("front_brake", &self.front_brake)
            .field("rear_brake", &self.rear_brake)
            .field("brake_peak", &self.brake_peak)
            .field("parking_brake", &self.parking_brake)
            .field("half_shaft_stiffness", &self.half_shaft_stiffness)
            .finish()
    }
}

fn default_crr() -> f64 {
    0.012
}
fn default_park() -> f64 {
    1500.0
}

/// Body and road load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodySpec {
    /// Vehicle mass with wheels, kg (> 0).
    pub mass: f64,
    /// Wheelbase, m (> 0).
    pub wheelbase: f64,
    /// Centre-of-gravity height, m (>= 0).
    pub cg_height: f64,
    /// Static share of the weight on the front axle, (0, 1).
    pub front_weight: f64,
    /// Drag area Cd A, m^2 (>= 0).
    pub drag_area: f64,
    /// Air density, kg/m^3 (> 0). Default 1.2.
    #[serde(default = "default_rho")]
    pub air_density: f64,
}

fn default_rho() -> f64 {
    1.2
}

/// A validation failure: the path of the offending field and what is allowed.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    /// Field keys from the top, as written in the file (used to place the message), e.g.
    /// `["gearbox", "dog", "min_overlap"]`.
    pub path: Vec<&'static str>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl SpecError {
    pub(crate) fn within(mut self, section: &'static str) -> Self {
        self.path.insert(0, section);
        self
    }
}

pub(crate) fn err(key: &'static str, message: String) -> SpecError {
    SpecError { path: vec![key], message }
}

pub(crate) fn pos(key: &'static str, v: f64) -> Result<(), SpecError> {
    if v.is_finite() && v > 0.0 {
        plausible(key, v)
    } else {
        Err(err(key, format!("`{key}` is {v}; it must be a finite number > 0")))
    }
}

fn nonneg(key: &'static str, v: f64) -> Result<(), SpecError> {
    if v.is_finite() && v >= 0.0 {
        plausible(key, v)
    } else {
        Err(err(key, format!("`{key}` is {v}; it must be a finite number >= 0")))
    }
}

/// Refuses a value outside its plausible range ([`crate::limits`]).
pub(crate) fn plausible(key: &'static str, v: f64) -> Result<(), SpecError> {
    match crate::limits::outside(key, v) {
        Some(range) => Err(err(key, format!("`{key}` is {v}; it must be {range}"))),
        None => Ok(()),
    }
}

fn within(key: &'static str, v: f64, lo: f64, hi: f64, what: &str) -> Result<(), SpecError> {
    if v.is_finite() && v > lo && v < hi { Ok(()) } else { Err(err(key, format!("`{key}` is {v}; it must be {what}"))) }
}

impl VehicleSpec {
    /// Checks every parameter and the relations between them.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.engine.validate().map_err(|e| e.within("engine"))?;
        match (&self.clutch, &self.gearbox, &self.automatic) {
            (Some(cl), Some(gb), None) => {
                cl.validate().map_err(|e| e.within("clutch"))?;
                gb.validate().map_err(|e| e.within("gearbox"))?;
            }
            (None, None, Some(at)) => {
                at.validate(&self.engine.map, self.engine.rev_limiter.rpm).map_err(|e| e.within("automatic"))?;
            }
            _ => {
                return Err(err(
                    if self.automatic.is_some() { "automatic" } else { "name" },
                    "give either `clutch` and `gearbox` (a manual or sequential box) or `automatic`, not both or neither"
                        .into(),
                ));
            }
        }
        self.driveline_validate().map_err(|e| e.within("driveline"))?;
        self.wheels_validate().map_err(|e| e.within("wheels"))?;
        self.body_validate().map_err(|e| e.within("body"))
    }

    fn driveline_validate(&self) -> Result<(), SpecError> {
        let d = &self.driveline;
        pos("final_drive", d.final_drive)?;
        d.differential.validate().map_err(|e| e.within("differential"))?;
        if let Drive::All { front_share, centre } = &d.drive {
            within("front_share", *front_share, 0.0, 1.0, "in (0, 1)")?;
            centre.validate().map_err(|e| e.within("centre"))?;
        }
        Ok(())
    }

    fn wheels_validate(&self) -> Result<(), SpecError> {
        let w = &self.wheels;
        pos("radius", w.radius)?;
        pos("inertia", w.inertia)?;
        w.tyre.validate().map_err(|m| err("tyre", m))?;
        w.combined.validate().map_err(|m| err("combined", m))?;
        nonneg("rolling_resistance", w.rolling_resistance)?;
        nonneg("front_brake", w.front_brake)?;
        nonneg("rear_brake", w.rear_brake)?;
        nonneg("parking_brake", w.parking_brake)?;
        if !(w.brake_peak.is_finite() && w.brake_peak >= 1.0) {
            return Err(err("brake_peak", format!("`brake_peak` is {}; it must be >= 1", w.brake_peak)));
        }
        if let Some(k) = w.half_shaft_stiffness {
            pos("half_shaft_stiffness", k)?;
        }
        Ok(())
    }

    fn body_validate(&self) -> Result<(), SpecError> {
        let b = &self.body;
        pos("mass", b.mass)?;
        pos("wheelbase", b.wheelbase)?;
        nonneg("cg_height", b.cg_height)?;
        within("front_weight", b.front_weight, 0.0, 1.0, "in (0, 1)")?;
        nonneg("drag_area", b.drag_area)?;
        pos("air_density", b.air_density)?;
        Ok(())
    }
}

impl EngineSpec {
    fn validate(&self) -> Result<(), SpecError> {
        let map = self.map.build().map_err(|m| err("map", m))?;
        pos("inertia", self.inertia)?;
        nonneg("stall_rpm", self.stall_rpm)?;
        pos("idle_rpm", self.idle_rpm)?;
        if self.idle_rpm <= self.stall_rpm {
            return Err(err(
                "idle_rpm",
                format!("`idle_rpm` is {}; it must be above `stall_rpm` ({})", self.idle_rpm, self.stall_rpm),
            ));
        }
        let (lo, hi) = map.speed_range();
        let (lo, hi) = (lo / crate::torque_map::RPM, hi / crate::torque_map::RPM);
        if self.idle_rpm < lo - 1e-9 || self.idle_rpm > hi {
            return Err(err(
                "idle_rpm",
                format!(
                    "the map covers {lo:.0}..{hi:.0} rpm but `idle_rpm` is {}; the curves must cover the idle speed",
                    self.idle_rpm
                ),
            ));
        }
        if map.full_load(self.idle_rpm * crate::torque_map::RPM) <= 0.0 {
            return Err(err("map", format!("the full-load torque at idle ({} rpm) must be > 0 N m", self.idle_rpm)));
        }
        if let Some(s) = self.start_rpm
            && !(s.is_finite() && s > self.stall_rpm && s < self.idle_rpm)
        {
            return Err(err(
                "start_rpm",
                format!("`start_rpm` is {s}; it must lie between `stall_rpm` and `idle_rpm`"),
            ));
        }
        (|| {
            nonneg("kp", self.idle.kp)?;
            nonneg("ki", self.idle.ki)?;
            if !(self.idle.max_throttle >= 0.0 && self.idle.max_throttle <= 1.0) {
                return Err(err(
                    "max_throttle",
                    format!("`max_throttle` is {}; it must be in [0, 1]", self.idle.max_throttle),
                ));
            }
            Ok(())
        })()
        .map_err(|e| e.within("idle"))?;
        let rl = &self.rev_limiter;
        (|| {
            if !(rl.rpm.is_finite() && rl.rpm > self.idle_rpm) {
                return Err(err("rpm", format!("rev limiter `rpm` is {}; it must be above `idle_rpm`", rl.rpm)));
            }
            nonneg("hysteresis_rpm", rl.hysteresis_rpm)?;
            nonneg("hold", rl.hold)
        })()
        .map_err(|e| e.within("rev_limiter"))?;
        self.starter.validate().map_err(|e| err("starter", format!("`starter`: {e}")))?;
        if let Some(why) = crate::limits::table_outside(self.starter.points(), 3e4, 1e4) {
            return Err(err("starter", format!("`starter` (rpm, N m): {why}")));
        }
        if let Some(f) = &self.fuel {
            f.validate().map_err(|e| e.within("fuel"))?;
        }
        Ok(())
    }
}

fn default_density() -> f64 {
    745.0
}

impl FuelMapSpec {
    fn validate(&self) -> Result<(), SpecError> {
        pos("density", self.density)?;
        for (key, v) in [("rpm", &self.rpm), ("torque", &self.torque)] {
            if v.is_empty() || v.windows(2).any(|w| w[1] <= w[0]) || v.iter().any(|x| !x.is_finite()) {
                return Err(err("fuel", format!("fuel map `{key}` must be finite and strictly increasing")));
            }
        }
        if self.grams_per_s.len() != self.rpm.len()
            || self.grams_per_s.iter().any(|r| r.len() != self.torque.len() || r.iter().any(|g| g.is_nan() || *g < 0.0))
        {
            return Err(err("grams_per_s", "one row per rpm, one value >= 0 g/s per torque".into()));
        }
        Ok(())
    }

    /// Fuel rate at speed `rpm` and torque `tau`, g/s (bilinear, held beyond the ends).
    pub fn rate(&self, rpm: f64, tau: f64) -> f64 {
        let locate = |axis: &[f64], x: f64| -> (usize, f64) {
            if axis.len() == 1 || x <= axis[0] {
                return (0, 0.0);
            }
            let mut i = 1;
            while i < axis.len() - 1 && axis[i] < x {
                i += 1;
            }
            let s = ((x - axis[i - 1]) / (axis[i] - axis[i - 1])).min(1.0);
            (i - 1, s)
        };
        let (i, si) = locate(&self.rpm, rpm);
        let (j, sj) = locate(&self.torque, tau);
        let g = |a: usize, b: usize| self.grams_per_s[a.min(self.rpm.len() - 1)][b.min(self.torque.len() - 1)];
        let r0 = g(i, j) + sj * (g(i, j + 1) - g(i, j));
        let r1 = g(i + 1, j) + sj * (g(i + 1, j + 1) - g(i + 1, j));
        r0 + si * (r1 - r0)
    }
}

/// Checks a friction pack: `mu` table (>= 0), `peak >= 1`, at least one surface, radii with
/// `inner < outer`. Shared by the driver's clutch and an automatic's lock-up clutch.
pub(crate) fn check_pack(mu: &Table1D, peak: f64, surfaces: u32, outer: f64, inner: f64) -> Result<(), SpecError> {
    mu.validate().map_err(|e| err("mu", format!("`mu`: {e}")))?;
    if mu.y_range().0 < 0.0 {
        return Err(err("mu", "`mu` values must be >= 0".into()));
    }
    if let Some(why) = crate::limits::table_outside(mu.points(), 1e4, 10.0) {
        return Err(err("mu", format!("`mu` (rad/s, friction coefficient): {why}")));
    }
    if !(peak.is_finite() && peak >= 1.0) {
        return Err(err("peak", format!("`peak` is {peak}; it must be >= 1 (static / kinetic)")));
    }
    if surfaces == 0 {
        return Err(err("surfaces", "`surfaces` is 0; a clutch has at least one friction surface".into()));
    }
    pos("outer_radius", outer)?;
    pos("inner_radius", inner)?;
    if inner >= outer {
        return Err(err("inner_radius", format!("`inner_radius` {inner} must be below `outer_radius` {outer}")));
    }
    Ok(())
}

impl ClutchSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_pack(&self.mu, self.peak, self.surfaces, self.outer_radius, self.inner_radius)?;
        pos("clamp_force", self.clamp_force)?;
        if !(self.full_engagement >= 0.0 && self.full_engagement < self.bite_point && self.bite_point <= 1.0) {
            return Err(err(
                "bite_point",
                format!(
                    "need 0 <= full_engagement < bite_point <= 1; got {} and {}",
                    self.full_engagement, self.bite_point
                ),
            ));
        }
        if !(self.progression.is_finite() && self.progression >= 1.0) {
            return Err(err("progression", format!("`progression` is {}; it must be >= 1", self.progression)));
        }
        pos("disc_inertia", self.disc_inertia)?;
        if let Some(d) = &self.damper {
            (|| {
                pos("stiffness", d.stiffness)?;
                nonneg("damping", d.damping)
            })()
            .map_err(|e| e.within("damper"))?;
        }
        (|| {
            pos("heat_capacity", self.thermal.heat_capacity)?;
            nonneg("cooling", self.thermal.cooling)?;
            if !self.thermal.ambient.is_finite() {
                return Err(err("ambient", "`ambient` must be a finite temperature".into()));
            }
            if let Some(f) = &self.thermal.fade {
                f.validate().map_err(|e| err("fade", format!("`fade`: {e}")))?;
                if f.y_range().0 < 0.0 {
                    return Err(err("fade", "`fade` factors must be >= 0".into()));
                }
                if let Some(why) = crate::limits::table_outside(f.points(), 1e4, 10.0) {
                    return Err(err("fade", format!("`fade` (deg C, factor): {why}")));
                }
            }
            Ok(())
        })()
        .map_err(|e| e.within("thermal"))
    }

    /// Geometry factor `cgeo = N (r_o + r_i) / 2` (uniform wear), m.
    pub fn cgeo(&self) -> f64 {
        self.surfaces as f64 * (self.outer_radius + self.inner_radius) / 2.0
    }

    /// Normalised clamp force (0..1) at pedal travel `p` (0 up, 1 floored): 1 up to
    /// `full_engagement`, then `s^progression` with `s = (bite - p) / (bite - full)`, 0 beyond
    /// the bite point. A diaphragm spring keeps its clamp force nearly constant over the wear
    /// range; the progression is the cushion (segment) spring between the facings.
    pub fn clamp_fraction(&self, p: f64) -> f64 {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        let s = ((self.bite_point - p) / (self.bite_point - self.full_engagement)).clamp(0.0, 1.0);
        // Pedal up or past the bite point (most steps): the power's exact values, without it.
        if s == 1.0 || s == 0.0 { s } else { s.powf(self.progression) }
    }
}

impl GearboxSpec {
    fn validate(&self) -> Result<(), SpecError> {
        if self.ratios.is_empty() {
            return Err(err("ratios", "`ratios` is empty; give at least one forward gear".into()));
        }
        if self.ratios.len() > 10 {
            return Err(err("ratios", format!("{} forward gears; at most 10 are supported", self.ratios.len())));
        }
        for (k, r) in self.ratios.iter().enumerate() {
            if !(r.is_finite() && *r > 0.0) {
                return Err(err(
                    "ratios",
                    format!("gear {} ratio is {r}; forward ratios must be finite and > 0", k + 1),
                ));
            }
            if k > 0 && *r >= self.ratios[k - 1] {
                return Err(err(
                    "ratios",
                    format!(
                        "gear {} ratio {r} is not below gear {} ({}); ratios must decrease",
                        k + 1,
                        k,
                        self.ratios[k - 1]
                    ),
                ));
            }
        }
        if let Some(r) = self.reverse
            && !(r.is_finite() && r < 0.0)
        {
            return Err(err("reverse", format!("`reverse` is {r}; a reverse ratio must be finite and < 0")));
        }
        pos("idler_inertia", self.idler_inertia)?;
        pos("output_inertia", self.output_inertia)?;
        self.dog_validate().map_err(|e| e.within("dog"))?;
        if let Some(s) = &self.synchro {
            (|| {
                pos("mu", s.mu)?;
                pos("cone_radius", s.cone_radius)?;
                within("cone_angle_deg", s.cone_angle_deg, 0.0, 45.0, "in (0, 45) deg")?;
                within("blocker_position", s.blocker_position, 0.0, self.dog.clearance, "in (0, dog clearance) m")?;
                pos("index_speed", s.index_speed)
            })()
            .map_err(|e| e.within("synchro"))?;
        }
        let l = &self.linkage;
        (|| {
            pos("mass", l.mass)?;
            nonneg("damping", l.damping)?;
            nonneg("coulomb", l.coulomb)?;
            pos("v_threshold", l.v_threshold)?;
            pos("stop_stiffness", l.stop_stiffness)?;
            nonneg("stop_damping", l.stop_damping)?;
            nonneg("detent_force", l.detent_force)?;
            pos("detent_width", l.detent_width)?;
            if l.detent_width >= self.dog.clearance {
                return Err(err("detent_width", "`detent_width` must be below the dog clearance".into()));
            }
            Ok(())
        })()
        .map_err(|e| e.within("linkage"))?;
        pos("shift_force", self.shift_force)?;
        (|| {
            pos("clutch_release_time", self.shifter.clutch_release_time)?;
            pos("timeout", self.shifter.timeout)
        })()
        .map_err(|e| e.within("shifter"))
    }

    fn dog_validate(&self) -> Result<(), SpecError> {
        let d = &self.dog;
        if d.teeth == 0 {
            return Err(err("teeth", "`teeth` is 0; a dog ring has at least one dog".into()));
        }
        pos("tooth_height", d.tooth_height)?;
        pos("clearance", d.clearance)?;
        pos("min_overlap", d.min_overlap)?;
        if d.min_overlap >= d.tooth_height {
            return Err(err(
                "min_overlap",
                format!(
                    "`min_overlap` {} m is not below `tooth_height` {} m; the overlap to engage must be smaller than the teeth",
                    d.min_overlap, d.tooth_height
                ),
            ));
        }
        pos("max_engage_speed", d.max_engage_speed)?;
        pos("max_torque", d.max_torque)?;
        pos("stiffness", d.stiffness)?;
        nonneg("damping", d.damping)?;
        let pitch = 360.0 / d.teeth as f64;
        if !(d.backlash_deg.is_finite() && d.backlash_deg >= 0.0 && d.backlash_deg < pitch) {
            return Err(err(
                "backlash_deg",
                format!("`backlash_deg` is {}; it must be in [0, 360/teeth = {pitch}) deg", d.backlash_deg),
            ));
        }
        pos("face_radius", d.face_radius)?;
        nonneg("face_friction", d.face_friction)
    }
}

impl DifferentialSpec {
    fn validate(&self) -> Result<(), SpecError> {
        match *self {
            DifferentialSpec::Open | DifferentialSpec::Locked => Ok(()),
            DifferentialSpec::ClutchPack { preload, power_ramp, coast_ramp } => {
                nonneg("preload", preload)?;
                nonneg("power_ramp", power_ramp)?;
                nonneg("coast_ramp", coast_ramp)
            }
            DifferentialSpec::Viscous { coefficient } => pos("coefficient", coefficient),
        }
    }
}

//! Vehicles in the ECS: a vehicle is a [`Driveline`] root whose parts (engine, clutch, idlers,
//! dogs, synchronisers, differentials, wheels, tyres, brakes, body) are entities like any other,
//! plus its description ([`VehicleDefinition`]), the names of its main parts
//! ([`VehicleParts`]), and the controllers ([`VehicleController`]) that turn a
//! [`VehicleInput`] into the network's run-time inputs every step, with a [`VehicleTelemetry`]
//! written after it.
//!
//! The controllers are systems: [`control_vehicles`] in
//! [`crate::DrivelineSystems::Control`], the actuators in `Actuation`, the coupled step with
//! heat, fuel and telemetry in `Solve`; each calls the phase of
//! `driveline_core::vehicle::VehicleControl` that `driveline_core::Vehicle::step` calls in the
//! same place. Their state is the root's [`VehicleController`], built from the
//! [`VehicleDefinition`] by [`control_vehicles`] once the network is built in `Prepare`
//! (also after a scene load) and again after a structural rebuild, so that even the first step
//! sees the right clutch, tyre and pedal inputs; a parameter edit of a part keeps them (see the
//! crate docs, "Editing parts").

use crate::{Driveline, DrivelineCache, DrivelineStepFailed, SpawnError, spawn_network};
use bevy_ecs::entity::{EntityMapper, MapEntities};
use bevy_ecs::prelude::*;
use bevy_reflect::prelude::*;
use driveline_core::vehicle::driver::{Cycle, Driver, DriverParams};
use driveline_core::vehicle::{
    Controlled, Controllers, DriverInput, Layout, PendingStep, Road, StepPlan, Telemetry, VehicleControl, VehicleError,
    VehicleEvent, VehicleSpec, WHEELS, build,
};
use driveline_core::{IntegrationParameters, SnapshotError, StateAdjustment, StateWriteError, VehicleSnapshot};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a vehicle is: its description and what its tyres push against. The plugin builds the
/// controllers from it; editing it has no effect on a running vehicle (edit the parts). The
/// vehicles of an equal description hold one copy of it ([`build::shared`]).
#[derive(Component, Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Component, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[require(VehicleController, VehicleInput, VehicleTelemetry, VehicleParts, Overrides)]
pub struct VehicleDefinition {
    /// The validated description (an automatic's gearbox inline).
    pub spec: Arc<VehicleSpec>,
    /// The vehicle's own body, or a game's chassis.
    pub road: Road,
}

/// The vehicle's controllers (shift controller, engine controller, linkages, clutch heat),
/// created from its [`VehicleDefinition`] once the network is built and again after every
/// structural rebuild. A runtime cache: reflected as an opaque value that a scene saves as
/// nothing and loads as empty (the controllers are built again from the definition).
#[derive(Component, Reflect, Default, Clone)]
#[reflect(opaque)]
#[reflect(Component, Default, Clone, Serialize, Deserialize)]
pub struct VehicleController {
    /// The description and layout the controllers are built from, shared with the vehicles
    /// of an equal description ([`build::shared`]).
    shared: Option<(Arc<VehicleSpec>, Road, Arc<Layout>)>,
    control: Option<VehicleControl>,
    generation: u64,
    /// How far this tick's step has come (see [`Stage`]).
    stage: Stage,
    /// The clutch and brake parts whose engagement inputs the actuators drive, for the
    /// [`crate::ClutchEngagement`] written in `Actuation`.
    engaged: Vec<Engaged>,
    /// Which built-in controllers run, as their components were when last looked at; `None`
    /// once a controller's component was added to or removed from a part (see
    /// [`controllers_changed`]), when they are looked at again.
    running: Option<Controllers>,
    /// The network generation whose controllers could not start ([`Layout::mismatch`]),
    /// reported once; tried again after the next build.
    refused: Option<u64>,
}

/// A clutch or brake part whose engagement is a run-time input.
#[derive(Clone, Copy)]
struct Engaged {
    /// Element index.
    k: usize,
    part: Entity,
    input: driveline_core::InputId,
    /// The engagement input before this tick's actuation (bits), to tell what the actuators changed.
    before: u64,
}

/// How far a vehicle's step has come in the current tick: planned and controlled in
/// `Control`, actuated in `Actuation`, solved (and back to `Idle`) in `Solve`.
#[derive(Clone, Copy, Default)]
enum Stage {
    /// No step under way: `Solve` takes a whole step (the controllers were built after
    /// `Control`, or the step size is zero).
    #[default]
    Idle,
    /// The [`CycleDriver`] ran in `Control`, which then refused the step (a bad step size):
    /// `Solve`, which reports the refusal, does not drive again.
    Driven,
    /// Input checked, transmission and engine controllers run.
    Controlled { plan: StepPlan, controlled: Controlled },
    /// Actuated: the inputs of the first sub-step are written.
    Actuated { plan: StepPlan, pending: PendingStep },
}

impl Serialize for VehicleController {
    /// Saved as nothing: the controllers are rebuilt from the [`VehicleDefinition`].
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit()
    }
}

impl<'de> Deserialize<'de> for VehicleController {
    /// Loaded empty: the plugin builds the controllers from the [`VehicleDefinition`].
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <()>::deserialize(deserializer)?;
        Ok(Self::default())
    }
}

impl VehicleController {
    /// The controllers, once the network has been built.
    pub fn control(&self) -> Option<&VehicleControl> {
        self.control.as_ref()
    }
    /// Events of the last step (shifts, blocked dogs, stalls...).
    pub fn events(&self) -> &[VehicleEvent] {
        self.control.as_ref().map_or(&[], |c| c.events())
    }
}

/// The vehicle's built-in engine controller (idle speed, rev limiter, stall and start, the
/// transmission's torque reductions) drives this engine: on the engine's part entity
/// ([`VehicleParts::engine`]). Remove it to drive the engine yourself: its `engine.throttle`
/// (the effective throttle the torque map sees, [0, 1]) and `starter.torque` (N m) inputs then
/// take what you write in the root's [`crate::DrivelineInputs`]. Insert it again to hand the
/// engine back. See `driveline_core::vehicle::Controllers`.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[component(on_add = controllers_changed, on_remove = controllers_changed)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct EngineController;

/// The vehicle's built-in transmission controller runs: on the vehicle's root. For a manual
/// or sequential box, the gear selection, the shift linkages and the clutch actuator; for an
/// automatic, the TCU with its hydraulics, the lock-up and the park pawl. Remove it to shift
/// yourself: write the shift elements' (or the clutch's) [`crate::ClutchEngagement`], and the
/// other inputs (`lockup.force`, `park.engage`, each dog's `engagement`) in
/// [`crate::DrivelineInputs`]; they keep the value last written. The engine controller, the
/// brakes, the tyres, heat and telemetry keep working (the telemetry's gear fields keep their
/// last values). Example: `custom_shift_strategy`. See `driveline_core::vehicle::Controllers`.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct TransmissionController;

/// The built-in clutch actuator drives this clutch: on the driver's clutch part
/// ([`VehicleParts::clutch`]) of a manual or sequential box. It turns the pedal (or the
/// auto-clutch's command) into the clutch's normalised normal force through the diaphragm
/// spring, with fade, and writes the part's [`crate::ClutchEngagement`] in `Actuation`. Remove it
/// to drive the clutch yourself: the engagement then keeps the value you wrote last, while the
/// gear selection, the shift linkages, the engine controller and everything else keep
/// working. Insert it again to hand the clutch back. See
/// `driveline_core::vehicle::Controllers::clutch_actuator`.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[component(on_add = controllers_changed, on_remove = controllers_changed)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct ClutchActuator;

/// An automatic's built-in hydraulic piston drives this shift element: on each of
/// [`VehicleParts::shift_elements`]. It turns the TCU's pressure into the element's normalised
/// normal force (the piston's fill and stroke) and writes the part's
/// [`crate::ClutchEngagement`] in `Actuation`. Remove it to drive that element yourself: its
/// engagement then keeps the value you wrote last, while the TCU runs its shifts on the other
/// elements. Insert it again to hand the element back. See
/// `driveline_core::vehicle::Controllers::pistons`.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[component(on_add = controllers_changed, on_remove = controllers_changed)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct HydraulicPiston;

/// A manual or sequential box's built-in shift linkage drives this dog clutch: on each of
/// [`VehicleParts::dogs`]. The sleeve carrying the dog moves as the gear selection asks (the
/// hand or actuator's force, the synchroniser's blocker, the dog tips, the detents and end
/// stops; see `driveline_core::vehicle::linkage`) and writes the dog's `engagement` input and
/// its synchroniser's `force` input in `Actuation`. Remove it to drive that gear's dog (and
/// synchroniser) yourself: write the dog's [`crate::ClutchEngagement`] (a friction-model dog is
/// a [`crate::Clutch`] part; a backlash dog, a [`crate::DogClutch`], takes `<dog>.engagement`
/// in the root's [`crate::DrivelineInputs`]) and the synchroniser part's; the inputs keep the
/// value last written, the sleeve still moves, and a shift into the gear completes when its
/// dog's engagement reaches 1. The other gears' linkages, the clutch actuator and the engine
/// controller keep working. Insert it again to hand the dog back. See
/// `driveline_core::vehicle::Controllers::linkages`.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[component(on_add = controllers_changed, on_remove = controllers_changed)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct ShiftLinkage;

/// The driveline's own fixed rate, Hz, on a vehicle's root: a fixed tick longer than
/// `1 / rate` is taken as equal sub-steps of at most that length, each with the whole chain
/// of controllers, actuators and the coupled solve (the first sub-step's phases run in
/// `Control` and `Actuation`, the others inside `Solve`, through the same functions). The
/// driver's input, what users wrote over the actuators and a chassis' [`crate::chassis::WheelContact`]
/// hold over the whole tick. `DrivelineRate(1000.0)` runs the driveline at 1 kHz inside a game's
/// 60 Hz physics step (17 sub-steps of 0.98 ms). Without it the driveline steps once per tick
/// (sub-stepped only while a box shifts at a tick longer than 1 ms). A value that is not finite
/// or outside [1, 1e6] Hz is refused with a [`crate::DrivelineEditRefused`] and the last valid
/// one kept. See `driveline_core::vehicle::VehicleControl::set_max_step`.
#[derive(Component, Reflect, Debug, Clone, Copy, PartialEq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct DrivelineRate(pub f64);

impl Default for DrivelineRate {
    /// 1 kHz.
    fn default() -> Self {
        Self(1000.0)
    }
}

/// The highest [`DrivelineRate`], Hz.
pub const MAX_DRIVELINE_RATE: f64 = 1e6;

/// Hands a root's [`DrivelineRate`] to its controllers when it differs from theirs; a bad
/// value (reported once, when written) keeps the last valid one.
fn apply_rate(
    control: &mut VehicleControl,
    root: Entity,
    rate: Option<Ref<DrivelineRate>>,
    sink: &std::sync::Mutex<Vec<crate::DrivelineEditRefused>>,
) {
    let hz = rate.as_ref().map(|r| r.0);
    let wanted = match hz {
        None => None,
        Some(hz) if hz.is_finite() && (1.0..=MAX_DRIVELINE_RATE).contains(&hz) => Some(1.0 / hz),
        Some(hz) => {
            if rate.is_some_and(|r| r.is_changed()) {
                let message = format!(
                    "DrivelineRate {hz} Hz refused: a rate is finite, from 1 to {MAX_DRIVELINE_RATE} Hz; the last valid rate is kept"
                );
                refuse(sink, root, root, message);
            }
            return;
        }
    };
    if control.max_step() != wanted {
        // In range by the match above.
        let _ = control.set_max_step(wanted);
    }
}

/// The built-in controllers' components a vehicle's parts carry.
type ControllerComponents<'w, 's> =
    Query<'w, 's, (Has<EngineController>, Has<ClutchActuator>, Has<HydraulicPiston>, Has<ShiftLinkage>)>;

/// A built-in controller's component was added to a part or removed from it: its vehicle looks
/// again at which controllers run, at its next step (a hook, so that a vehicle's tick does not
/// look up every part that could carry one).
fn controllers_changed(mut world: bevy_ecs::world::DeferredWorld, ctx: bevy_ecs::lifecycle::HookContext) {
    let Some(root) = world.get::<crate::PartOf>(ctx.entity).map(|p| p.0) else { return };
    if let Some(mut vc) = world.get_mut::<VehicleController>(root) {
        vc.bypass_change_detection().running = None;
    }
}

/// Which built-in controllers run for the vehicle of `vc`: as last looked at, unless a
/// controller's component was added or removed since, or `parts` or `transmission` changed.
fn running_controllers(
    vc: &mut VehicleController,
    parts: &Ref<VehicleParts>,
    transmission: bool,
    q: &ControllerComponents,
) -> Controllers {
    match vc.running {
        Some(c) if c.transmission == transmission && !parts.is_changed() => c,
        _ => {
            let c = controllers_of(parts, transmission, q);
            vc.running = Some(c);
            c
        }
    }
}

/// Which built-in controllers run for a vehicle with `parts`: those whose components are
/// present ([`TransmissionController`] on the root, the others on the parts they drive).
fn controllers_of(parts: &VehicleParts, transmission: bool, q: &ControllerComponents) -> Controllers {
    let has = |e: Entity| q.get(e).unwrap_or((false, false, false, false));
    // One bit per entity of `list` whose component (`pick`) is present; beyond 64, all on.
    let bits = |list: &[Entity], pick: fn((bool, bool, bool, bool)) -> bool| {
        let mut bits = u64::MAX;
        for (k, &e) in list.iter().enumerate().take(64) {
            if !pick(has(e)) {
                bits &= !(1 << k);
            }
        }
        bits
    };
    Controllers {
        engine: has(parts.engine).0,
        transmission,
        clutch_actuator: parts.clutch.is_none_or(|c| has(c).1),
        pistons: bits(&parts.shift_elements, |h| h.2),
        linkages: bits(&parts.dogs, |h| h.3),
    }
}

/// What users wrote over the built-in controllers and actuators for the coming step, gathered
/// in `Solve` before the step, written in every sub-step, and cleared after it: clutch
/// engagements (see [`crate::ClutchEngagement`]) and the root's [`crate::DrivelineInputs`].
#[derive(Component, Debug, Clone, Default)]
pub(crate) struct Overrides {
    pub(crate) engagements: Vec<(driveline_core::InputId, f64)>,
    pub(crate) inputs: Vec<(driveline_core::InputId, f64)>,
}

/// The main parts of a vehicle, on its root: the entities to read or edit.
#[derive(Component, Reflect, Debug, Clone, PartialEq)]
#[component(map_entities)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct VehicleParts {
    /// The engine's crankshaft inertia (its [`crate::Inertia`] and [`crate::BodyState`]).
    pub engine: Entity,
    /// The driver's friction clutch ([`crate::Clutch`], [`crate::ClutchEngagement`]); `None`
    /// for an automatic.
    pub clutch: Option<Entity>,
    /// An automatic's torque converter lock-up clutch.
    pub lockup: Option<Entity>,
    /// An automatic's shift elements, in the gearbox file's order.
    pub shift_elements: Vec<Entity>,
    /// A manual or sequential box's dog clutches, one per gear: first gear up, reverse last
    /// (each with its [`ShiftLinkage`]).
    pub dogs: Vec<Entity>,
    /// The wheels' inertias: front left, front right, rear left, rear right.
    pub wheels: Vec<Entity>,
    /// The tyres, in the order of `wheels`.
    pub tyres: Vec<Entity>,
    /// The brakes, in the order of `wheels`.
    pub brakes: Vec<Entity>,
    /// The body's mass (`None` on an external road).
    pub body: Option<Entity>,
}

impl MapEntities for VehicleParts {
    fn map_entities<E: EntityMapper>(&mut self, mapper: &mut E) {
        self.engine = mapper.get_mapped(self.engine);
        for e in [&mut self.clutch, &mut self.lockup, &mut self.body].into_iter().flatten() {
            *e = mapper.get_mapped(*e);
        }
        for list in [&mut self.shift_elements, &mut self.dogs, &mut self.wheels, &mut self.tyres, &mut self.brakes] {
            for e in list.iter_mut() {
                *e = mapper.get_mapped(*e);
            }
        }
    }
}

impl Default for VehicleParts {
    fn default() -> Self {
        Self {
            engine: Entity::PLACEHOLDER,
            clutch: None,
            lockup: None,
            shift_elements: Vec::new(),
            dogs: Vec::new(),
            wheels: Vec::new(),
            tyres: Vec::new(),
            brakes: Vec::new(),
            body: None,
        }
    }
}

/// A vehicle event (a shift started or completed with its figures, a blocked dog, a stall, a
/// pawl that ratchets...), sent after the step it happened in. An automatic's
/// `VehicleEventKind::ShiftCompleted` carries its [`driveline_core::automatic::ShiftReport`].
#[derive(Message, Debug, Clone, Copy, PartialEq)]
pub struct VehicleMessage {
    /// The vehicle's root entity.
    pub vehicle: Entity,
    /// What happened, and when.
    pub event: VehicleEvent,
}

/// What the driver asks for this step (write it in [`crate::DrivelineSystems::Input`] or
/// `Control`).
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Component, Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct VehicleInput(pub DriverInput);

/// The vehicle's outputs after the last step. The controllers write them here, in place, at
/// each step (the record a core [`driveline_core::Vehicle`] keeps beside its controllers): the
/// vehicle's snapshot holds it, and a [`CycleDriver`] reads the last step's end from it. A
/// write of it lasts until the next step rewrites its fields; it is an output, not an input.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Component, Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct VehicleTelemetry(pub Telemetry);

/// A drive-cycle driver on a vehicle's root: the driver model of
/// [`driveline_core::vehicle::driver`] follows a speed trace and writes the root's
/// [`VehicleInput`] (pedals, clutch, gear or selector) at the start of each step, from the
/// vehicle's telemetry at that moment. It runs in [`crate::DrivelineSystems::Control`], first
/// (in the vehicles' step when the phases run there: see [`crate::FusedVehicleSteps`]), so an
/// input written in `Input` is overwritten; remove the component to drive the car yourself.
///
/// The result is bit for bit that of a core [`driveline_core::Vehicle`] stepped with
/// `driver.input_at(&cycle, at, vehicle.telemetry(), dt)` before each step, `at` as
/// [`CycleDriver::input`] says. Traffic, Monte Carlo runs and benches put one on each car:
/// the driver runs in the car's own step, where its telemetry is in the cache, without a pass
/// over the fleet of its own.
///
/// Where the time on the trace it would read is not finite (an `offset` that is not finite, a
/// `repeat` over a trace that ends at 0 s), the driver is refused with a
/// [`crate::DrivelineEditRefused`] on the root each step, and the input is left as it stands.
///
/// ```
/// use bevy_app::{App, FixedUpdate};
/// use bevy_driveline::prelude::*;
/// use driveline_core::vehicle::driver::Cycle;
/// use driveline_core::vehicle::{Road, Vehicle};
/// use std::sync::Arc;
///
/// let assets = concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets");
/// let spec = Vehicle::load(format!("{assets}/vehicles/sedan_8hp.ron").as_ref()).unwrap().spec().clone();
/// let text = std::fs::read_to_string(format!("{assets}/cycles/udds.csv")).unwrap();
/// let udds = Arc::new(Cycle::parse(&text, "udds").unwrap());
/// let mut app = App::new();
/// app.add_plugins(DrivelinePlugins::default());
/// // Three cars, each 37 s further along UDDS, looping.
/// let cars: Vec<_> = (0..3)
///     .map(|i| {
///         let root = spawn_vehicle(app.world_mut(), spec.clone(), Road::Body).unwrap();
///         let driver = CycleDriver::new(&spec, udds.clone()).starting_at(37.0 * i as f64, true);
///         app.world_mut().entity_mut(root).insert(driver);
///         root
///     })
///     .collect();
/// for _ in 0..100 {
///     let step = std::time::Duration::from_millis(1);
///     app.world_mut().resource_mut::<bevy_time::Time>().advance_by(step);
///     app.world_mut().run_schedule(FixedUpdate);
/// }
/// // 37 s into UDDS the trace asks for speed: that car's driver is on the throttle.
/// assert!(app.world().get::<VehicleInput>(cars[1]).unwrap().0.throttle > 0.0);
/// ```
#[derive(Component, Reflect, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Component, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleDriver {
    /// The speed trace, shared by the cars that follow it.
    pub cycle: Arc<Cycle>,
    /// Where on the trace the car starts, s: the trace is read at the vehicle's time plus this.
    /// Default 0 (a fleet spreads its cars over the trace with different offsets).
    pub offset: f64,
    /// Whether the trace starts over at its end (traffic that never stops). Default false: past
    /// the end the driver holds the last sample's speed.
    pub repeat: bool,
    /// The driver model and its state (speed controller's integral, gear, shift phase), tuned
    /// by its [`DriverParams`].
    pub driver: Driver,
}

impl CycleDriver {
    /// A driver of `spec`'s vehicle with the default [`DriverParams`], following `cycle` from
    /// its start, once.
    pub fn new(spec: &VehicleSpec, cycle: Arc<Cycle>) -> Self {
        Self::with_params(spec, cycle, DriverParams::default())
    }

    /// As [`CycleDriver::new`], with the driver tuned by `params`.
    pub fn with_params(spec: &VehicleSpec, cycle: Arc<Cycle>, params: DriverParams) -> Self {
        Self { cycle, offset: 0.0, repeat: false, driver: Driver::new(spec, params) }
    }

    /// The trace read `offset` seconds ahead of the vehicle's clock, starting over at its end
    /// when `repeat`.
    pub fn starting_at(mut self, offset: f64, repeat: bool) -> Self {
        self.offset = offset;
        self.repeat = repeat;
        self
    }

    /// The input for the step of length `dt` that starts at `tel.time`: the driver reads the
    /// trace at `tel.time + offset`, taken modulo the trace's duration when `repeat`.
    pub fn input(&mut self, tel: &Telemetry, dt: f64) -> DriverInput {
        let at = self.trace_time(tel.time);
        self.driver.input_at(&self.cycle, at, tel, dt)
    }

    /// Where on the trace the driver reads at the vehicle's time `time`, s.
    #[inline(always)]
    fn trace_time(&self, time: f64) -> f64 {
        let at = time + self.offset;
        if self.repeat { self.cycle.lap(at) } else { at }
    }

    /// Why the trace cannot be read where [`CycleDriver::trace_time`] gave a value that is not
    /// finite.
    #[cold]
    fn refusal(&self) -> String {
        if !self.offset.is_finite() {
            format!("CycleDriver.offset: {} s is not finite; the input is kept", self.offset)
        } else {
            format!(
                "CycleDriver.repeat: the trace `{}` ends at {} s; repeating needs a trace that \
                 does not end at 0 s; the input is kept",
                self.cycle.name,
                self.cycle.duration()
            )
        }
    }
}

/// A vehicle's cycle driver, if it has one, writes the input of the step that starts now
/// (`tel`, the vehicle's telemetry, is the last step's end); refusals into `sink`.
#[inline(always)]
fn drive(
    driver: Option<Mut<CycleDriver>>,
    tel: &Telemetry,
    input: &mut Mut<VehicleInput>,
    dt: f64,
    root: Entity,
    sink: &std::sync::Mutex<Vec<crate::DrivelineEditRefused>>,
) {
    let Some(mut d) = driver else { return };
    let at = d.trace_time(tel.time);
    if !at.is_finite() {
        refuse(sink, root, root, d.refusal());
        return;
    }
    let d = &mut *d;
    input.0 = d.driver.input_at(&d.cycle, at, tel, dt);
}

/// Registers the vehicle components for reflection.
pub(crate) fn register_types(app: &mut bevy_app::App) {
    app.register_type::<VehicleDefinition>()
        .register_type::<CycleDriver>()
        .register_type::<VehicleController>()
        .register_type::<VehicleParts>()
        .register_type::<VehicleInput>()
        .register_type::<VehicleTelemetry>()
        .register_type::<EngineController>()
        .register_type::<TransmissionController>()
        .register_type::<ClutchActuator>()
        .register_type::<HydraulicPiston>()
        .register_type::<ShiftLinkage>()
        .register_type::<DrivelineRate>();
}

/// Spawns a vehicle: a [`Driveline`] root with its [`VehicleDefinition`], [`VehicleParts`],
/// controllers, input and telemetry, and one part entity per element of its network. Fails,
/// with nothing spawned, on a bad description (the error names the parameter and what is
/// allowed). An automatic's gearbox file not loaded yet is read relative to the working
/// directory.
pub fn spawn_vehicle(world: &mut World, spec: VehicleSpec, road: Road) -> Result<Entity, SpawnError> {
    let root = world.spawn_empty().id();
    spawn_vehicle_on(world, root, spec, road).inspect_err(|_| {
        world.despawn(root);
    })?;
    Ok(root)
}

/// [`spawn_vehicle`] onto the empty entity `root`.
pub(crate) fn spawn_vehicle_on(
    world: &mut World,
    root: Entity,
    mut spec: VehicleSpec,
    road: Road,
) -> Result<(), SpawnError> {
    if let Some(at) = &mut spec.automatic {
        at.resolve(std::path::Path::new(".")).map_err(VehicleError::Gearbox)?;
    }
    spec.validate().map_err(VehicleError::Spec)?;
    let (shared, layout) = build::shared(&spec, road);
    driveline_core::Network::build(&layout.spec).map_err(VehicleError::Build)?;
    let ids = spawn_network(world, root, &layout.spec, Some(&layout));
    let by_name = |name: &str| layout.spec.elements.iter().position(|e| e.name == name).map(|i| ids[i]);
    let wheels = |prefix: &str| WHEELS.iter().filter_map(|w| by_name(&format!("{prefix}_{w}"))).collect();
    let parts = VehicleParts {
        engine: by_name("engine").unwrap_or(Entity::PLACEHOLDER),
        clutch: if spec.clutch.is_some() { by_name("clutch") } else { None },
        lockup: layout.automatic.as_ref().and_then(|a| by_name(&format!("{}lockup", a.prefix))),
        shift_elements: layout
            .automatic
            .as_ref()
            .map(|a| a.elements.iter().filter_map(|n| by_name(n)).collect())
            .unwrap_or_default(),
        dogs: layout.gears.iter().filter_map(|g| by_name(&g.dog)).collect(),
        wheels: wheels("wheel"),
        tyres: wheels("tyre"),
        brakes: wheels("brake"),
        body: by_name("body"),
    };
    if let Ok(mut engine) = world.get_entity_mut(parts.engine) {
        engine.insert(EngineController);
    }
    if let Some(clutch) = parts.clutch {
        world.entity_mut(clutch).insert(ClutchActuator);
    }
    for &element in &parts.shift_elements {
        world.entity_mut(element).insert(HydraulicPiston);
    }
    for &dog in &parts.dogs {
        world.entity_mut(dog).insert(ShiftLinkage);
    }
    if road == Road::Chassis {
        // The game writes the contacts; until it does, each wheel carries its static share.
        for (k, &wheel) in parts.wheels.iter().enumerate() {
            let load = build::chassis_mass(&spec.body, k) * build::G;
            world.entity_mut(wheel).insert((
                crate::chassis::WheelContact(driveline_core::vehicle::WheelContact { load, ..Default::default() }),
                crate::chassis::WheelForces::default(),
            ));
        }
    }
    world.entity_mut(root).insert((
        Driveline { parameters: IntegrationParameters::vehicle() },
        VehicleDefinition { spec: shared.clone(), road },
        VehicleController { shared: Some((shared, road, layout)), ..Default::default() },
        TransmissionController,
        parts,
    ));
    Ok(())
}

/// Sets the vehicle `root` moving at `speed` m/s before its next step, for a reset or a
/// teleport: its body, its wheels rolling without slip, and the driveline following through
/// whatever is locked, geared or sprung to them (`driveline_core::vehicle::VehicleControl::
/// set_road_speed` says exactly how). The part entities' [`crate::BodyState`]s are written at
/// once. Returns the written values that could not be taken as written; fails when `root` is
/// not a running vehicle (its network not built yet) or `speed` is not finite.
pub fn set_road_speed(world: &mut World, root: Entity, speed: f64) -> Result<Vec<StateAdjustment>, StateWriteError> {
    with_running_vehicle(world, root, true, |control, sim, tel| control.set_road_speed(sim, tel, speed))
        .unwrap_or_else(|| Err(StateWriteError::NotABody(format!("vehicle {root} (not spawned or not built yet)"))))
}

/// Runs `edit` on the controllers, simulation and telemetry of the running vehicle at `root`
/// (`None` when it is not one: not spawned, or its network not built yet). When it succeeds, the parts'
/// [`crate::BodyState`]s and the root's [`VehicleTelemetry`] are written from the simulation:
/// marked changed with `mark_changed` (the next step then takes them as a user's write, which
/// they agree with), else as the write-back writes them.
fn with_running_vehicle<R, E>(
    world: &mut World,
    root: Entity,
    mark_changed: bool,
    edit: impl FnOnce(&mut VehicleControl, &mut driveline_core::Simulation, &mut Telemetry) -> Result<R, E>,
) -> Option<Result<R, E>> {
    let mut entity = world.get_entity_mut(root).ok()?;
    // (The record edited as a copy, written back below with the parts' states.)
    let mut telemetry = entity.get::<VehicleTelemetry>()?.0;
    let mut vc = entity.take::<VehicleController>()?;
    // A step under way starts again in `Solve` from the state this edit leaves.
    vc.stage = Stage::Idle;
    let result = (|| {
        let mut cache = entity.get_mut::<DrivelineCache>()?;
        let cache = &mut *cache;
        let (Some(control), Some(sim)) = (vc.control.as_mut(), cache.sim.as_mut()) else { return None };
        Some(edit(control, sim, &mut telemetry).map(|r| {
            let states: Vec<(Entity, (f64, f64))> =
                cache.parts.iter().enumerate().filter_map(|(k, &e)| Some((e, sim.body_state(k)?))).collect();
            (r, states)
        }))
    })();
    entity.insert(vc);
    let (r, states) = match result? {
        Ok(x) => x,
        Err(e) => return Some(Err(e)),
    };
    if let Some(mut t) = world.get_mut::<VehicleTelemetry>(root) {
        t.0 = telemetry;
    }
    for (part, (angle, speed)) in states {
        if let Some(mut state) = world.get_mut::<crate::BodyState>(part) {
            let state = if mark_changed { &mut *state } else { state.bypass_change_detection() };
            *state = crate::BodyState { angle, speed };
        }
    }
    Some(Ok(r))
}

/// Why [`snapshot_vehicle`] or [`restore_vehicle`] failed. A failed restore changes nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VehicleSnapshotError {
    /// The entity is not the root of a running vehicle (not spawned, or its network not built
    /// yet: the first fixed step builds it).
    #[error("{0} is not a running vehicle's root (not spawned, or not built yet)")]
    NotRunning(Entity),
    /// The snapshot does not restore into this vehicle.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

/// Everything the next step of the vehicle at `root` depends on (its simulation and
/// controllers), to restore with [`restore_vehicle`]: see [`VehicleSnapshot`].
pub fn snapshot_vehicle(world: &World, root: Entity) -> Result<VehicleSnapshot, VehicleSnapshotError> {
    let not_running = VehicleSnapshotError::NotRunning(root);
    let control = world.get::<VehicleController>(root).and_then(|vc| vc.control.as_ref()).ok_or(not_running.clone())?;
    let sim = world.get::<DrivelineCache>(root).and_then(|c| c.sim.as_ref()).ok_or(not_running.clone())?;
    let tel = world.get::<VehicleTelemetry>(root).ok_or(not_running)?;
    Ok(control.snapshot(sim, &tel.0))
}

/// Puts the vehicle at `root` back in the state of `snapshot` (taken of a vehicle of the same
/// description): the next fixed steps are bit for bit those that followed the snapshot, as in
/// [`driveline_core::Vehicle::restore`]. The parts' [`crate::BodyState`]s and the root's
/// [`VehicleTelemetry`] are written at once, as the write-back would (not as user writes: the
/// next step starts from the restored state exactly).
pub fn restore_vehicle(
    world: &mut World,
    root: Entity,
    snapshot: &VehicleSnapshot,
) -> Result<(), VehicleSnapshotError> {
    match with_running_vehicle(world, root, false, |control, sim, tel| control.restore(sim, tel, snapshot)) {
        None => Err(VehicleSnapshotError::NotRunning(root)),
        Some(result) => result.map_err(VehicleSnapshotError::from),
    }
}

/// Below this many vehicles the control and actuation systems run on the calling thread (a
/// vehicle's control is a few hundred nanoseconds; a hand-off to the pool, microseconds).
const PARALLEL_CONTROL: usize = crate::solve::PARALLEL_WRITE_BACK;

/// Runs the closure over every item of the query, in parallel across the compute task pool
/// from [`PARALLEL_CONTROL`] items on.
macro_rules! for_each_vehicle {
    ($query:expr, $f:expr) => {
        if $query.iter().len() < PARALLEL_CONTROL {
            $query.iter_mut().for_each($f);
        } else {
            $query.par_iter_mut().for_each($f);
        }
    };
}

/// A refusal about `part` of vehicle `root` (the root itself for the vehicle's own
/// components), into `sink`.
fn refuse(sink: &std::sync::Mutex<Vec<crate::DrivelineEditRefused>>, root: Entity, part: Entity, message: String) {
    let r = crate::DrivelineEditRefused { driveline: Some(root), part, message };
    sink.lock().unwrap_or_else(|p| p.into_inner()).push(r);
}

/// Builds the controllers of a vehicle from its [`VehicleDefinition`] once its network is
/// built (again after a structural rebuild), and turns the built-in controllers on or off as
/// their components are present. A network that lost what the controllers drive (a part
/// renamed or removed, of another kind, an input made a constant) gets none: `Err` says why,
/// once per build.
fn ensure_controllers(
    def: &VehicleDefinition,
    vc: &mut VehicleController,
    cache: &mut DrivelineCache,
    tel: &mut Mut<VehicleTelemetry>,
    controllers: Controllers,
) -> Result<(), String> {
    let Some(sim) = cache.sim.as_mut() else { return Ok(()) };
    if vc.control.is_none() && vc.refused == Some(cache.generation) {
        return Ok(());
    }
    if vc.control.is_none() || vc.generation != cache.generation {
        // (The definition may have been edited since: a structural rebuild.)
        let (spec, layout) = match &vc.shared {
            Some((spec, road, layout)) if *road == def.road && (Arc::ptr_eq(spec, &def.spec) || *spec == def.spec) => {
                (spec.clone(), layout.clone())
            }
            _ => {
                let (spec, layout) = build::shared(&def.spec, def.road);
                vc.shared = Some((spec.clone(), def.road, layout.clone()));
                (spec, layout)
            }
        };
        // A network rebuilt from edited parts may have lost what the controllers drive.
        if let Some(why) = layout.mismatch(sim) {
            vc.control = None;
            vc.refused = Some(cache.generation);
            return Err(format!(
                "{why}: the vehicle's controllers stop (and it with them) until its parts match again"
            ));
        }
        vc.refused = None;
        let mut control = VehicleControl::new(spec, layout, def.road, sim);
        control.start(sim, &mut tel.0);
        vc.control = Some(control);
        vc.generation = cache.generation;
        vc.engaged = (cache.parts.iter().enumerate())
            .filter_map(|(k, &part)| {
                let input = sim.engagement_input(k).filter(|_| sim.element_engagement(k).is_some())?;
                Some(Engaged { k, part, input, before: 0 })
            })
            .collect();
    }
    let control = vc.control.as_mut().expect("built above");
    if control.controllers() != controllers {
        control.set_controllers(controllers);
    }
    Ok(())
}

/// `Control`: every vehicle's controllers, in one pass over the vehicles. First they are
/// built once its network is built (again after a structural rebuild) and turned on or off as
/// their components ([`EngineController`], [`TransmissionController`]) are present; then the
/// driver's input is checked, the transmission controller runs (a manual or sequential box's
/// shift controller, an automatic's TCU), then the engine controller (idle speed, rev
/// limiter, stall and start, the transmission's torque reduction); see
/// `driveline_core::vehicle::VehicleControl::control_transmission` and `control_engine`. This
/// starts the tick's step: a shift at a step longer than 1 ms is sub-stepped, and the
/// sub-steps after the first run their whole chain in `Solve`.
///
/// When no other system of the schedule runs between this one and the vehicles' step
/// ([`crate::FusedVehicleSteps`]), this leaves every vehicle to its step, which then runs the
/// whole chain (the same bits, one pass over the vehicles instead of three).
#[allow(clippy::type_complexity)]
pub fn control_vehicles(
    time: Res<bevy_time::Time>,
    mut roots: Query<(
        Entity,
        &VehicleDefinition,
        &mut VehicleInput,
        &mut VehicleController,
        &mut DrivelineCache,
        &mut VehicleTelemetry,
        Ref<VehicleParts>,
        Has<TransmissionController>,
        Option<Ref<DrivelineRate>>,
        Option<&mut CycleDriver>,
    )>,
    components: ControllerComponents,
    contacts: Query<Ref<crate::chassis::WheelContact>>,
    mut refused: crate::outbox::Outbox<'_, crate::DrivelineEditRefused>,
    mut refusals: Local<std::sync::Mutex<Vec<crate::DrivelineEditRefused>>>,
    fused: Res<crate::FusedVehicleSteps>,
) {
    // Nothing runs between here and the step: the step takes the whole chain.
    if fused.is_fused() {
        return;
    }
    let dt = time.delta_secs_f64();
    let components = &components;
    let (contacts, sink) = (&contacts, &*refusals);
    for_each_vehicle!(roots, |(
        root,
        def,
        mut input,
        mut vc,
        mut cache,
        mut tele,
        parts,
        transmission,
        rate,
        driver,
    )| {
        let vc = &mut *vc;
        vc.stage = Stage::Idle;
        let controllers = running_controllers(vc, &parts, transmission, components);
        if let Err(message) = ensure_controllers(def, vc, &mut cache, &mut tele, controllers) {
            refuse(sink, root, root, message);
        }
        let (Some(control), Some(sim)) = (vc.control.as_mut(), cache.simulation()) else { return };
        apply_rate(control, root, rate, sink);
        if def.road == Road::Chassis {
            take_contacts(control, root, &parts, contacts, sink);
        }
        if dt <= 0.0 {
            return;
        }
        drive(driver, &tele.0, &mut input, dt, root, sink);
        // A refused step (a bad step size) is left to `Solve`, which reports it.
        let Ok(plan) = control.plan_step(sim, &input.0, dt) else {
            vc.stage = Stage::Driven;
            return;
        };
        let Ok(mut controlled) = control.check_input(sim, &input.0, plan.length(1, sim.time())) else {
            vc.stage = Stage::Driven;
            return;
        };
        control.control_transmission(sim, &mut controlled);
        control.control_engine(sim, &mut controlled);
        vc.stage = Stage::Controlled { plan, controlled };
    });
    crate::solve::flush_refusals(&mut refusals, &mut refused);
}

/// A chassis vehicle's wheel contacts handed to its controllers; refusals into `sink`.
fn take_contacts(
    control: &mut VehicleControl,
    root: Entity,
    parts: &VehicleParts,
    contacts: &Query<Ref<crate::chassis::WheelContact>>,
    sink: &std::sync::Mutex<Vec<crate::DrivelineEditRefused>>,
) {
    crate::chassis::take_contacts(control, &parts.wheels, contacts, |part, message| refuse(sink, root, part, message));
}

/// `Actuation`: every vehicle's actuators (a manual's shift linkages and clutch actuator, an
/// automatic's hydraulic pistons and lock-up; brakes, tyre loads, the grade) write the
/// simulation's inputs, and each clutch and brake part's [`crate::ClutchEngagement`] is set to
/// the normalised force its actuator applies. A user system ordered
/// `.after(DrivelineSystems::Actuation).before(DrivelineSystems::Solve)` that writes another
/// value wins for the step (see `driveline_core::vehicle::VehicleControl::actuate`); so does a
/// value written earlier in the tick, which is left as written.
pub(crate) fn actuate_vehicles(
    ticks: bevy_ecs::system::SystemChangeTick,
    book: Res<crate::Book>,
    mut roots: Query<(&mut VehicleController, &mut DrivelineCache)>,
    mut engagements: Query<&mut crate::ClutchEngagement, Without<crate::SkipWriteBack>>,
    mut changed: Local<crate::Notes<(Entity, f64)>>,
    mut list: Local<Vec<(Entity, f64)>>,
) {
    // The step actuates (see `control_vehicles`).
    if book.fused {
        return;
    }
    let sink = &*changed;
    for_each_vehicle!(roots, |(mut vc, mut cache)| {
        let vc = &mut *vc;
        let (Some(control), Some(sim)) = (vc.control.as_mut(), cache.simulation_mut()) else { return };
        let Stage::Controlled { plan, controlled } = &vc.stage else { return };
        for e in &mut vc.engaged {
            e.before = sim.input_value(e.input).to_bits();
        }
        let pending = control.actuate(sim, controlled);
        vc.stage = Stage::Actuated { plan: *plan, pending };
        // Only what the actuators changed: the write-back left the rest as the simulation has
        // it.
        for e in &vc.engaged {
            if sim.input_value(e.input).to_bits() != e.before
                && let Some(u) = sim.element_engagement(e.k)
            {
                sink.push((e.part, u));
            }
        }
    });
    // The engagement components, on the calling thread (a query of parts cannot be written
    // from the parallel pass over the roots). A value a user wrote since the last step is
    // kept: it is handed over in `Solve`.
    // (Each thread's buffer, and this list, keep their room from tick to tick; an element's
    // part is written once a tick, so the order of the threads' lists does not matter.)
    changed.drain_into(&mut list);
    for (part, u) in list.drain(..) {
        if let Ok(mut e) = engagements.get_mut(part)
            && e.0.to_bits() != u.to_bits()
            && !e.last_changed().is_newer_than(book.last_write_back, ticks.this_run())
        {
            e.0 = u;
        }
    }
}

/// What `step_vehicles` fetches of a vehicle's root.
type RootItem<'a> = (
    Entity,
    &'a VehicleDefinition,
    Mut<'a, VehicleController>,
    Mut<'a, VehicleInput>,
    Mut<'a, VehicleTelemetry>,
    Mut<'a, DrivelineCache>,
    Mut<'a, Overrides>,
    Ref<'a, VehicleParts>,
    bool,
    Option<Ref<'a, DrivelineRate>>,
    Option<Mut<'a, CycleDriver>>,
);

/// `Solve`: the coupled step of every vehicle, in parallel across the compute task pool, with
/// what users wrote over the built-in actuators ([`crate::ClutchEngagement`],
/// [`crate::DrivelineInputs`]); then heat, fuel and telemetry, and the sub-steps after the
/// first of a shift at a long step, each the whole chain. A vehicle whose step did not start
/// in `Control` (its controllers were built in this tick's `Solve`, a snapshot was restored
/// since, or every vehicle's when the phases run in the step: [`crate::FusedVehicleSteps`])
/// takes the whole chain here. Failures are reported in entity order; then
/// the step's vehicle events as [`VehicleMessage`]s, vehicle by vehicle in entity order. Then
/// the drivelines that are not vehicles step (`solve::step_drivelines`).
pub(crate) fn step_vehicles(
    time: Res<bevy_time::Time>,
    mut roots: Query<(
        Entity,
        &VehicleDefinition,
        &mut VehicleController,
        &mut VehicleInput,
        &mut VehicleTelemetry,
        &mut DrivelineCache,
        &mut Overrides,
        Ref<VehicleParts>,
        Has<TransmissionController>,
        Option<Ref<DrivelineRate>>,
        Option<&mut CycleDriver>,
    )>,
    components: ControllerComponents,
    (contacts, mut wheel_forces): (Query<Ref<crate::chassis::WheelContact>>, Query<&mut crate::chassis::WheelForces>),
    mut failed: crate::outbox::Outbox<'_, DrivelineStepFailed>,
    mut messages: crate::outbox::Outbox<'_, VehicleMessage>,
    mut failures: Local<std::sync::Mutex<Vec<DrivelineStepFailed>>>,
    (mut refused, mut refusals): (
        crate::outbox::Outbox<'_, crate::DrivelineEditRefused>,
        Local<std::sync::Mutex<Vec<crate::DrivelineEditRefused>>>,
    ),
    (mut noted, mut noted_list): (Local<crate::Notes<Entity>>, Local<Vec<Entity>>),
    (book, mut parts_of): (Res<crate::Book>, crate::solve::FleetParts),
    (mut hints, mut split): (ResMut<crate::CacheHints>, Local<crate::columns::Split>),
    (mut others, mut other_failures): (crate::solve::OtherRoots, Local<std::sync::Mutex<Vec<DrivelineStepFailed>>>),
) {
    let notes = &*book;
    // A fleet writes each vehicle's parts right after its step, while its simulation is in the
    // cache, on any number of compute threads (the write-back then leaves them: see
    // `solve::write_back`).
    let vehicles = roots.iter().len();
    let written = crate::solve::vehicles_write_parts(vehicles);
    book.vehicles_written.store(written, std::sync::atomic::Ordering::Relaxed);
    if written {
        parts_of.prepare();
    }
    let fused = written.then_some(&parts_of);
    let dt = time.delta_secs_f64();
    let sink = &*failures;
    let noted_sink = &*noted;
    let fail = |root, e: driveline_core::StepError| {
        let f = DrivelineStepFailed { driveline: root, message: e.to_string() };
        sink.lock().unwrap_or_else(|p| p.into_inner()).push(f);
    };
    let components = &components;
    let (contacts, refusal_sink) = (&contacts, &*refusals);
    let step = |(
        root,
        def,
        mut vc,
        mut input,
        mut tele,
        mut cache,
        mut overrides,
        parts,
        transmission,
        rate,
        driver,
    ): RootItem<'_>| {
        let vc = &mut *vc;
        let stage = match vc.stage {
            Stage::Actuated { plan, pending } => Some((plan, pending)),
            _ => None,
        };
        let driven = matches!(vc.stage, Stage::Driven);
        vc.stage = Stage::Idle;
        // Started in `Control` (which built the controllers), or not: then the whole chain here.
        if stage.is_none() {
            let controllers = running_controllers(vc, &parts, transmission, components);
            if let Err(message) = ensure_controllers(def, vc, &mut cache, &mut tele, controllers) {
                refuse(refusal_sink, root, root, message);
            }
        }
        let (Some(control), Some(sim)) = (vc.control.as_mut(), cache.sim.as_mut()) else { return };
        if stage.is_none() {
            apply_rate(control, root, rate, refusal_sink);
            if def.road == Road::Chassis {
                take_contacts(control, root, &parts, contacts, refusal_sink);
            }
        }
        if dt <= 0.0 {
            // No step; the parts still get what the simulation holds (a written state taken).
            if let Some(parts) = fused {
                parts.write(root, &cache, notes);
            }
            return;
        }
        if stage.is_none() && !driven {
            drive(driver, &tele.0, &mut input, dt, root, refusal_sink);
        }
        let (engagements, inputs) = (&overrides.engagements, &overrides.inputs);
        // The controllers write the telemetry in place, in the component.
        let tel = &mut tele.0;
        // The same step as the core `Vehicle`'s: the first sub-step's phases ran in `Control`
        // and `Actuation`; a refused step leaves the state where it was, and the controllers
        // still see its end.
        let result = match stage {
            Some((plan, pending)) => {
                let h = plan.length(1, sim.time());
                control
                    .solve(sim, tel, pending, h, engagements, inputs)
                    .and_then(|()| control.finish_step(sim, tel, &input.0, &plan, 2, engagements, inputs))
            }
            None => control
                .plan_step(sim, &input.0, dt)
                .and_then(|plan| control.finish_step(sim, tel, &input.0, &plan, 1, engagements, inputs)),
        };
        if let Err(e) = result {
            fail(root, e);
        }
        if !overrides.engagements.is_empty() || !overrides.inputs.is_empty() {
            overrides.engagements.clear();
            overrides.inputs.clear();
        }
        notes.note(root, sim);
        if let Some(parts) = fused {
            parts.write(root, &cache, notes);
        }
        // What the calling thread has to send below: events, a chassis' wheel forces.
        if !control.events().is_empty() || def.road == Road::Chassis {
            noted_sink.push(root);
        }
    };
    if vehicles < crate::solve::PARALLEL_DRIVELINES {
        roots.iter_mut().for_each(step);
    } else {
        // The next vehicle's controllers and simulation hinted toward the cache while this one
        // steps, where that pays (`CacheHints`): in a fleet each vehicle's state has left the
        // caches since its last step.
        let hint = hints.bypass_change_detection().this_tick();
        let ahead = |item: &RootItem<'_>, stage: usize| {
            if !hint {
                return;
            }
            if stage == 0 {
                // The components' own bytes, read by nothing yet: the controllers and the
                // simulation inline, the lists' pointers, the telemetry the step writes whole,
                // the driver model's state.
                use driveline_core::prefetch::value;
                value(&*item.2);
                value(&*item.5);
                value(&item.4.0);
                value(&*item.6);
                value(&*item.3);
                if let Some(driver) = &item.10 {
                    value(&**driver);
                }
                return;
            }
            if let (Some(control), Some(sim)) = (item.2.control.as_ref(), item.5.sim.as_ref()) {
                control.prefetch_stage(sim, stage);
            }
            if let Some(parts) = fused {
                parts.prefetch_stage(&item.5, stage);
            }
        };
        let started = bevy_platform::time::Instant::now();
        crate::columns::par_for_each_ahead(&mut roots, &mut split, hint, ahead, step);
        // (The tuner's own state: no system reads a change of it.)
        hints.bypass_change_detection().record(started.elapsed().as_secs_f64(), vehicles);
    }
    crate::solve::flush_failures(&mut failures, &mut failed);
    crate::solve::flush_refusals(&mut refusals, &mut refused);
    // Only the vehicles noted in the pass above, in entity order (a pass over every vehicle
    // on the calling thread finds each one's controller out of the cache).
    noted.drain_into(&mut noted_list);
    let noted = &mut *noted_list;
    noted.sort_unstable();
    for (root, def, vc, .., parts, _, _, _) in noted.drain(..).filter_map(|root| roots.get(root).ok()) {
        for e in vc.events() {
            messages.write(VehicleMessage { vehicle: root, event: *e });
        }
        if def.road == Road::Chassis
            && let Some(control) = vc.control()
        {
            for (k, &wheel) in parts.wheels.iter().enumerate().take(4) {
                if let Ok(mut f) = wheel_forces.get_mut(wheel) {
                    f.set_if_neq(crate::chassis::WheelForces(control.wheel_forces(k)));
                }
            }
        }
    }
    // Then the drivelines that are not vehicles.
    crate::solve::step_drivelines(time.delta_secs_f64(), &mut others, &mut failed, &mut other_failures, &book);
}

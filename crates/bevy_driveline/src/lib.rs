//! # bevy_driveline
//!
//! The Bevy plugin of Driveline: drivetrain parts are entities, solved every fixed step by the
//! exact stick-slip solver of [`driveline_core`].
//!
//! ## Getting started
//! ```
//! use bevy_app::{App, FixedUpdate};
//! use bevy_driveline::prelude::*;
//! use driveline_core::{ElementKind, Signal};
//!
//! let mut app = App::new();
//! app.add_plugins(DrivelinePlugins::default());
//! let world = app.world_mut();
//! let root = world.spawn(Driveline::default()).id();
//! let flywheel = world
//!     .spawn((Part::new("J", ElementKind::Inertia { J: 0.5, phi_start: Some(0.0), w_start: Some(0.0) }), PartOf(root)))
//!     .id();
//! world.spawn((
//!     Part::new("motor", ElementKind::Torque { tau: Signal::Constant(2.0), use_support: false }),
//!     PartOf(root),
//!     Connections::new().with("flange", flywheel, "flange_a"),
//! ));
//! for _ in 0..10 {
//!     app.world_mut().run_schedule(FixedUpdate);
//! }
//! ```
//!
//! ## Concepts
//! - A [`Driveline`] root entity groups its parts through the [`PartOf`] relationship.
//! - Every part carries a [`Part`]: its name and its [`ElementKind`] (inertia, clutch, gear, ...,
//!   with parameters, see the `driveline_core` element catalogue). Couplings say which flanges
//!   they join with [`Connections`], holding the `Entity` of the other part.
//! - The network of a root is compiled once and cached; it is rebuilt when a part is added,
//!   removed, or its `Part` or `Connections` change. A rebuild is *warm*: parts that existed
//!   keep their motion and the clock runs on (it falls back to the start values when the new
//!   network cannot start from that state).
//! - After each step the solver writes [`BodyState`] (inertias) and [`CouplingState`] (elements
//!   with a relative coordinate) back, and sends [`FrictionModeChanged`] messages with the event
//!   time located inside the step.
//! - Run-time inputs (pedals, actuator forces) are [`driveline_core::Signal::Input`] signals set
//!   through [`DrivelineInputs`] on the root.
//! - Whole vehicles: [`vehicle::spawn_vehicle`] spawns a root with one part entity per element of
//!   the vehicle's network and its controllers ([`vehicle::VehicleController`]); write a
//!   [`vehicle::VehicleInput`] each step and read [`vehicle::VehicleTelemetry`]. The result is
//!   bit for bit that of [`driveline_core::Vehicle`].
//!
//! ## Scheduling
//! [`DrivelinePlugins`] runs in the schedule you choose (default `FixedUpdate`), in the chained
//! sets of [`DrivelineSystems`]:
//! 1. `Input`: your systems that sample devices into inputs;
//! 2. `Control`: drivers, transmission controllers;
//! 3. `Actuation`: actuators write [`DrivelineInputs`] (pedal forces, pressures);
//! 4. `Solve`: topology rebuilds, inputs handed to the solver, vehicle controllers, the coupled
//!    step, vehicle heat and telemetry, and the new state written back to the part entities
//!    ([`BodyState`], [`CouplingState`]), all in the private [`DrivelineSolveSchedule`], where
//!    system-order ambiguity is an error;
//! 5. `Integrate`: your systems that read the new state before the messages go out;
//! 6. `Telemetry`: messages.
//!
//! The step size is the schedule's `Time` delta (the fixed timestep in `FixedUpdate`).
//!
//! The solve schedule runs its systems one after the other on the calling thread; each spreads
//! its drivelines (the write-back: their parts) over the compute task pool, and a vehicle's
//! control, coupled step and telemetry run back to back on one thread. Handing whole systems to
//! workers costs more than it gains here: with one car, most of a tick on a multi-threaded
//! executor is threads waking each other, and a fleet on two threads runs faster when the fixed
//! schedule is single-threaded (its systems still spread their loops over the pool; the figures
//! are in docs/performance.md):
//! `app.edit_schedule(FixedUpdate, |s| { s.set_executor(SingleThreadedExecutor::new()); })`.
//!
//! Every part's state is written after every step: some 50 entities per vehicle. A fleet that
//! reads only [`vehicle::VehicleTelemetry`] marks the parts [`SkipWriteBack`] (all of a
//! driveline's at once with [`skip_write_back`]); `driveline bench --no-part-states` measures
//! the difference (docs/performance.md has the figures).
//!
//! ## Plugins
//! | plugin | what it adds |
//! |---|---|
//! | [`DrivelineCorePlugin`] | sets, messages, topology cache, step, write-back |

#![warn(missing_docs)]

pub mod vehicle;

use bevy_app::{App, FixedUpdate, Plugin, PluginGroup, PluginGroupBuilder};
use bevy_ecs::intern::Interned;
use bevy_ecs::prelude::*;
use bevy_ecs::schedule::{LogLevel, ScheduleBuildSettings, ScheduleLabel, SingleThreadedExecutor};
use bevy_time::Time;
use driveline_core::{
    ElementKind, ElementSpec, FrictionMode, IntegrationParameters, Network, NetworkSpec, Scenario, Simulation,
};

/// Common imports.
pub mod prelude {
    pub use crate::vehicle::{VehicleController, VehicleInput, VehicleMessage, VehicleTelemetry, spawn_vehicle};
    pub use crate::{
        BodyState, Connections, CouplingState, Driveline, DrivelineBuildFailed, DrivelineCorePlugin, DrivelineInputs,
        DrivelineParts, DrivelinePlugins, DrivelineSolveSchedule, DrivelineStepFailed, DrivelineSystems,
        FrictionModeChanged, Part, PartOf, SkipWriteBack, skip_write_back, spawn_scenario,
    };
}

/// The chained phases of a driveline step, in order. See the crate docs, "Scheduling".
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DrivelineSystems {
    /// Device sampling into inputs (user systems).
    Input,
    /// Drivers and controllers (user systems, later the TCU and shift controllers).
    Control,
    /// Actuators writing [`DrivelineInputs`].
    Actuation,
    /// Topology rebuilds, inputs handed over, the coupled step.
    Solve,
    /// After the write-back (done at the end of `Solve`): user systems that read the new
    /// state before `Telemetry`.
    Integrate,
    /// Messages and telemetry.
    Telemetry,
}

/// All Driveline plugins. `DrivelinePlugins::new(FixedPostUpdate)` picks another schedule.
#[derive(Debug, Clone, Copy)]
pub struct DrivelinePlugins {
    schedule: Interned<dyn ScheduleLabel>,
}

impl Default for DrivelinePlugins {
    fn default() -> Self {
        Self::new(FixedUpdate)
    }
}

impl DrivelinePlugins {
    /// Runs the driveline systems in `schedule`.
    pub fn new(schedule: impl ScheduleLabel) -> Self {
        Self { schedule: schedule.intern() }
    }
}

impl PluginGroup for DrivelinePlugins {
    fn build(self) -> PluginGroupBuilder {
        PluginGroupBuilder::start::<Self>().add(DrivelineCorePlugin { schedule: self.schedule })
    }
}

/// Sets, messages, the topology cache, the step and the write-back.
#[derive(Debug, Clone, Copy)]
pub struct DrivelineCorePlugin {
    /// Schedule the systems run in.
    pub schedule: Interned<dyn ScheduleLabel>,
}

impl Plugin for DrivelineCorePlugin {
    fn build(&self, app: &mut App) {
        if !app.world().contains_resource::<Time>() {
            app.init_resource::<Time>();
        }
        app.add_message::<FrictionModeChanged>()
            .add_message::<DrivelineBuildFailed>()
            .add_message::<DrivelineStepFailed>()
            .add_message::<vehicle::VehicleMessage>();
        app.configure_sets(
            self.schedule,
            (
                DrivelineSystems::Input,
                DrivelineSystems::Control,
                DrivelineSystems::Actuation,
                DrivelineSystems::Solve,
                DrivelineSystems::Integrate,
                DrivelineSystems::Telemetry,
            )
                .chain(),
        );
        // The solve runs in a private schedule whose order is fully specified: any ambiguity
        // between its systems is an error when the schedule is built. Its systems form one
        // chain, so they run on the calling thread (a multi-threaded executor would only hand
        // each one to a worker and wait); each system spreads its drivelines over the compute
        // task pool itself.
        let mut solve = Schedule::new(DrivelineSolveSchedule);
        solve.set_build_settings(ScheduleBuildSettings { ambiguity_detection: LogLevel::Error, ..Default::default() });
        solve.set_executor(SingleThreadedExecutor::new());
        solve
            .add_systems((rebuild_topology, apply_inputs, vehicle::step_vehicles, step_drivelines, write_back).chain());
        app.add_schedule(solve);
        app.add_systems(
            self.schedule,
            (
                run_solve_schedule.in_set(DrivelineSystems::Solve),
                send_mode_messages.in_set(DrivelineSystems::Telemetry),
            ),
        );
    }
}

/// The private schedule of the solve phase: topology rebuilds, inputs, the coupled step, in
/// that order (run from [`DrivelineSystems::Solve`]; ambiguities in it are build errors).
#[derive(ScheduleLabel, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrivelineSolveSchedule;

/// Runs [`DrivelineSolveSchedule`].
fn run_solve_schedule(world: &mut World) {
    world.run_schedule(DrivelineSolveSchedule);
}

/// A driveline root. Its parts point at it with [`PartOf`].
#[derive(Component, Debug, Clone, Default)]
#[require(DrivelineParts, DrivelineCache, DrivelineInputs)]
pub struct Driveline {
    /// Solver tunables.
    pub parameters: IntegrationParameters,
}

/// This part belongs to the driveline root entity `.0`.
#[derive(Component, Debug, Clone, Copy, PartialEq, Eq)]
#[relationship(relationship_target = DrivelineParts)]
pub struct PartOf(pub Entity);

/// The parts of a driveline root, in the order they were added (the stable element order that
/// keeps runs deterministic).
#[derive(Component, Debug, Default)]
#[relationship_target(relationship = PartOf, linked_spawn)]
pub struct DrivelineParts(Vec<Entity>);

impl DrivelineParts {
    /// The part entities in element order.
    pub fn parts(&self) -> &[Entity] {
        &self.0
    }
}

/// A drivetrain part: a name unique within its driveline and what it is. Every part carries a
/// [`BodyState`] and a [`CouplingState`]; the ones that apply to its kind are written each step.
#[derive(Component, Debug, Clone, PartialEq)]
#[require(BodyState, CouplingState)]
pub struct Part {
    /// Unique name within the driveline (used in messages and files).
    pub name: String,
    /// Element kind with its parameters.
    pub kind: ElementKind,
}

impl Part {
    /// A part named `name` of kind `kind`.
    pub fn new(name: impl Into<String>, kind: ElementKind) -> Self {
        Self { name: name.into(), kind }
    }
}

/// One flange joint: this part's `flange` to `to_flange` of the part entity `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// Flange of this part, e.g. `"flange_a"`.
    pub flange: String,
    /// The other part.
    pub to: Entity,
    /// Flange of the other part.
    pub to_flange: String,
}

/// Flange joints declared by this part.
#[derive(Component, Debug, Clone, Default, PartialEq, Eq)]
pub struct Connections(pub Vec<Connection>);

impl Connections {
    /// No joints.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a joint of this part's `flange` to `to_flange` of `to`.
    pub fn with(mut self, flange: &str, to: Entity, to_flange: &str) -> Self {
        self.0.push(Connection { flange: flange.into(), to, to_flange: to_flange.into() });
        self
    }
}

/// Angle (rad or m) and speed (rad/s or m/s) of an inertia or mass part after the last step.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq)]
pub struct BodyState {
    /// Angle, rad (position, m, for a Mass).
    pub angle: f64,
    /// Speed, rad/s (m/s for a Mass).
    pub speed: f64,
}

/// Relative angle, relative speed, torque and friction mode of a coupling after the last step.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq)]
pub struct CouplingState {
    /// `phi_rel`, rad.
    pub phi_rel: f64,
    /// `w_rel`, rad/s.
    pub w_rel: f64,
    /// Element torque (MSL convention), N m.
    pub torque: f64,
    /// Friction mode, for friction elements.
    pub mode: Option<FrictionMode>,
    /// Power turned into heat, W.
    pub dissipation: f64,
}

/// Marks a part whose [`BodyState`] and [`CouplingState`] the plugin leaves alone: the
/// write-back skips it (at the archetype level, so it costs nothing per step). The part stays
/// in its driveline and is simulated as before; only its per-part state is not copied out.
///
/// Every part is written after every step by default, which for a vehicle means some 50
/// entities per step; a fleet that reads only [`VehicleTelemetry`](crate::vehicle::VehicleTelemetry)
/// saves that work (one to three microseconds per vehicle-step, a fifth to a half of a sedan
/// fleet's time in `driveline bench`, the larger share in the larger fleets) by marking the
/// parts it does not read, for example with [`skip_write_back`].
#[derive(Component, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkipWriteBack;

/// Marks every part of the driveline `root` with [`SkipWriteBack`] (parts added later are
/// written unless marked too).
pub fn skip_write_back(world: &mut World, root: Entity) {
    let parts: Vec<Entity> = world.get::<DrivelineParts>(root).map(|p| p.0.clone()).unwrap_or_default();
    for p in parts {
        if let Ok(mut e) = world.get_entity_mut(p) {
            e.insert(SkipWriteBack);
        }
    }
}

/// Run-time input values of a driveline, applied at the start of each step.
#[derive(Component, Debug, Clone, Default, PartialEq)]
pub struct DrivelineInputs(pub Vec<(String, f64)>);

impl DrivelineInputs {
    /// Sets (or adds) input `name`.
    pub fn set(&mut self, name: &str, value: f64) {
        match self.0.iter_mut().find(|e| e.0 == name) {
            Some(e) => e.1 = value,
            None => self.0.push((name.to_string(), value)),
        }
    }
}

/// The compiled network and running simulation of a root (rebuilt when the topology changes).
#[derive(Component, Debug, Default)]
pub struct DrivelineCache {
    sim: Option<Simulation>,
    /// Part entity of each element index (each part also holds its index in a `PartSlot`).
    parts: Vec<Entity>,
    /// Number of builds so far (controllers that resolved element indices rebuild on change).
    generation: u64,
}

impl DrivelineCache {
    /// The running simulation, once the network has been built.
    pub fn simulation(&self) -> Option<&Simulation> {
        self.sim.as_ref()
    }
    /// Mutable access for controllers that write inputs (see [`crate::vehicle`]).
    pub fn simulation_mut(&mut self) -> Option<&mut Simulation> {
        self.sim.as_mut()
    }
    /// Increments on every (re)build of the network.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// A friction part changed mode at `time` (located inside the step), MSL codes in `from`/`to`.
#[derive(Message, Debug, Clone, Copy, PartialEq)]
pub struct FrictionModeChanged {
    /// The driveline root.
    pub driveline: Entity,
    /// The friction part.
    pub part: Entity,
    /// Event time, s.
    pub time: f64,
    /// Mode before.
    pub from: FrictionMode,
    /// Mode after.
    pub to: FrictionMode,
}

/// A driveline's parts do not form a valid network; the message says why.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct DrivelineBuildFailed {
    /// The driveline root.
    pub driveline: Entity,
    /// What is wrong and what is allowed.
    pub message: String,
}

/// A driveline refused a step (the state would have become non-finite); it stays where it was.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct DrivelineStepFailed {
    /// The driveline root.
    pub driveline: Entity,
    /// What happened.
    pub message: String,
}

/// Spawns a scenario as a root with one part per element. Returns the root.
pub fn spawn_scenario(world: &mut World, scenario: &Scenario) -> Result<Entity, String> {
    let spec = scenario.resolved_spec().map_err(|e| e.to_string())?;
    let root = world.spawn(Driveline::default()).id();
    spawn_network(world, root, &spec)?;
    Ok(root)
}

/// Spawns one part entity per element of `spec` under `root`, with their connections.
pub(crate) fn spawn_network(world: &mut World, root: Entity, spec: &NetworkSpec) -> Result<(), String> {
    let ids: Vec<Entity> = spec
        .elements
        .iter()
        .map(|e| world.spawn((Part::new(e.name.clone(), e.kind.clone()), PartOf(root))).id())
        .collect();
    let find = |s: &str| -> Result<(Entity, String), String> {
        let (el, fl) = s.split_once('.').ok_or_else(|| format!("'{s}' is not element.flange"))?;
        let i = spec.elements.iter().position(|e| e.name == el).ok_or_else(|| format!("no element '{el}'"))?;
        Ok((ids[i], fl.to_string()))
    };
    for (a, b) in &spec.connections {
        let ((ea, fa), (eb, fb)) = (find(a)?, find(b)?);
        let mut e = world.entity_mut(ea);
        match e.get_mut::<Connections>() {
            Some(mut c) => c.0.push(Connection { flange: fa, to: eb, to_flange: fb }),
            None => {
                e.insert(Connections(vec![Connection { flange: fa, to: eb, to_flange: fb }]));
            }
        }
    }
    Ok(())
}

/// Rebuilds the network of every root whose parts changed.
fn rebuild_topology(
    mut roots: Query<(Entity, &Driveline, &DrivelineParts, &mut DrivelineCache)>,
    changed_roots: Query<(), Or<(Changed<DrivelineParts>, Changed<Driveline>)>>,
    changed_parts: Query<&PartOf, Or<(Changed<Part>, Changed<Connections>)>>,
    parts: Query<(&Part, Option<&Connections>)>,
    mut removed: RemovedComponents<Part>,
    mut failed: MessageWriter<DrivelineBuildFailed>,
    mut touched: Local<Vec<Entity>>,
    mut commands: Commands,
) {
    let any_removed = removed.read().count() > 0;
    // The roots of changed parts, gathered in one pass over the parts (asking each root
    // "is one of the changed parts mine?" would scan every part once per root).
    touched.clear();
    touched.extend(changed_parts.iter().map(|p| p.0));
    touched.sort_unstable();
    touched.dedup();
    for (root, driveline, members, mut cache) in &mut roots {
        let dirty =
            cache.sim.is_none() || any_removed || changed_roots.contains(root) || touched.binary_search(&root).is_ok();
        if !dirty || members.0.is_empty() {
            continue;
        }
        let mut spec = NetworkSpec::default();
        let mut names = Vec::with_capacity(members.0.len());
        for &e in &members.0 {
            let name = parts.get(e).map(|p| p.0.name.clone()).unwrap_or_default();
            names.push((e, name));
        }
        let name_of = |e: Entity| names.iter().find(|n| n.0 == e).map(|n| n.1.clone());
        let mut problem = None;
        for &e in &members.0 {
            let Ok((part, conns)) = parts.get(e) else { continue };
            spec.elements.push(ElementSpec { name: part.name.clone(), kind: part.kind.clone() });
            for c in conns.map(|c| c.0.as_slice()).unwrap_or_default() {
                match name_of(c.to) {
                    Some(other) => spec
                        .connections
                        .push((format!("{}.{}", part.name, c.flange), format!("{other}.{}", c.to_flange))),
                    None => problem = Some(format!("'{}' connects to an entity outside its driveline", part.name)),
                }
            }
        }
        // Warm rebuild: parts that existed keep their motion and the clock runs on; if the
        // changed network cannot start from that state, it starts from the parts' start values.
        let warm = problem.is_none().then(|| cache.sim.as_ref()).flatten().and_then(|old| {
            let mut warm_spec = spec.clone();
            for e in &mut warm_spec.elements {
                if let Some(k) = old.network().elements.iter().position(|o| o.name == e.name) {
                    e.kind.set_start_state(old.body_state(k), old.element_relative(k));
                }
            }
            Network::build(&warm_spec).ok().map(|net| (net, old.time()))
        });
        let result = match (problem, warm) {
            (Some(p), _) => Err(p),
            (None, Some((net, t0))) => Ok((net, t0)),
            (None, None) => Network::build(&spec).map(|net| (net, 0.0)).map_err(|e| e.to_string()),
        };
        match result {
            Ok((net, t0)) => {
                cache.sim = Some(Simulation::starting_at(net, driveline.parameters, t0));
                cache.generation += 1;
                cache.parts = members.0.iter().copied().filter(|e| parts.contains(*e)).collect();
                for (k, &e) in cache.parts.iter().enumerate() {
                    commands.entity(e).try_insert(PartSlot(k));
                }
            }
            Err(message) => {
                cache.sim = None;
                failed.write(DrivelineBuildFailed { driveline: root, message });
            }
        }
    }
}

/// Hands the inputs of each root to its simulation; refused values are reported and skipped.
fn apply_inputs(
    mut roots: Query<(Entity, &DrivelineInputs, &mut DrivelineCache)>,
    mut failed: MessageWriter<DrivelineBuildFailed>,
) {
    for (root, inputs, mut cache) in &mut roots {
        let Some(sim) = cache.sim.as_mut() else { continue };
        for (name, value) in &inputs.0 {
            if let Err(e) = sim.set_input(name, *value) {
                failed.write(DrivelineBuildFailed { driveline: root, message: e.to_string() });
            }
        }
    }
}

/// One coupled step of every driveline that is not a vehicle (vehicles step with their
/// controllers in `vehicle::step_vehicles`) by the schedule's time delta, in parallel across
/// the compute task pool (drivelines are independent; each one's result does not depend on the
/// thread). A refused step (a non-finite state) leaves the driveline where it was and is
/// reported, in entity order.
fn step_drivelines(
    time: Res<Time>,
    mut roots: Query<(Entity, &mut DrivelineCache), Without<vehicle::VehicleController>>,
    mut failed: MessageWriter<DrivelineStepFailed>,
    mut failures: Local<std::sync::Mutex<Vec<DrivelineStepFailed>>>,
) {
    let dt = time.delta_secs_f64();
    if dt <= 0.0 {
        return;
    }
    let sink = &*failures;
    roots.par_iter_mut().for_each(|(root, mut cache)| {
        if let Some(sim) = cache.sim.as_mut()
            && let Err(e) = sim.step(dt)
        {
            let f = DrivelineStepFailed { driveline: root, message: e.to_string() };
            sink.lock().unwrap_or_else(|p| p.into_inner()).push(f);
        }
    });
    flush_failures(&mut failures, &mut failed);
}

/// Writes the failures parallel systems collected, in entity order (deterministic whatever
/// thread found them).
pub(crate) fn flush_failures(
    failures: &mut std::sync::Mutex<Vec<DrivelineStepFailed>>,
    failed: &mut MessageWriter<DrivelineStepFailed>,
) {
    let list = failures.get_mut().unwrap_or_else(|p| p.into_inner());
    list.sort_by_key(|f| f.driveline);
    for f in list.drain(..) {
        failed.write(f);
    }
}

/// A part's element index in its driveline's network, set at each build (the build's
/// commands apply at the solve schedule's first sync point, before the step and the
/// write-back), so that the write-back finds the element without a search. Checked against
/// the cache: a part that the last build did not include is skipped.
#[derive(Component, Debug, Clone, Copy)]
struct PartSlot(usize);

/// Writes body and coupling states back to the part entities (in place, no commands), in
/// parallel over the parts: each reads only its own driveline's simulation. Parts marked
/// [`SkipWriteBack`] are not visited.
fn write_back(
    roots: Query<&DrivelineCache>,
    mut states: Query<(Entity, &PartOf, &PartSlot, &mut BodyState, &mut CouplingState), Without<SkipWriteBack>>,
) {
    states.par_iter_mut().for_each(|(entity, part_of, &PartSlot(k), mut body, mut coupling)| {
        let Ok(cache) = roots.get(part_of.0) else { return };
        let Some(sim) = cache.sim.as_ref() else { return };
        if cache.parts.get(k) != Some(&entity) {
            return;
        }
        if let Some((angle, speed)) = sim.body_state(k) {
            *body = BodyState { angle, speed };
        }
        if let Some((phi_rel, w_rel)) = sim.element_relative(k) {
            *coupling = CouplingState {
                phi_rel,
                w_rel,
                torque: sim.element_torque(k),
                mode: sim.element_mode(k),
                dissipation: sim.element_dissipation(k),
            };
        }
    });
}

/// Sends the mode changes of the last step.
fn send_mode_messages(roots: Query<(Entity, &DrivelineCache)>, mut out: MessageWriter<FrictionModeChanged>) {
    for (root, cache) in &roots {
        let Some(sim) = cache.sim.as_ref() else { continue };
        for e in sim.events() {
            if let Some(&part) = cache.parts.get(e.element) {
                out.write(FrictionModeChanged { driveline: root, part, time: e.time, from: e.from, to: e.to });
            }
        }
    }
}

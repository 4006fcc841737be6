//! # bevy_driveline
//!
//! The Bevy plugin of Driveline: drivetrain parts are entities with typed components, solved
//! every fixed step by the exact stick-slip solver of [`driveline_core`].
//!
//! ## Getting started
//! ```
//! use bevy_app::{App, FixedUpdate};
//! use bevy_driveline::prelude::*;
//! use bevy_ecs::name::Name;
//!
//! let mut app = App::new();
//! app.add_plugins(DrivelinePlugins::default());
//! let world = app.world_mut();
//! let root = world.spawn(Driveline::default()).id();
//! let flywheel = world
//!     .spawn((Name::new("J"), Inertia { j: 0.5, phi_start: Some(0.0), w_start: Some(0.0) }, PartOf(root)))
//!     .id();
//! world.spawn((
//!     Name::new("motor"),
//!     ConstantTorque { tau_constant: 2.0, use_support: false },
//!     PartOf(root),
//!     Connections::new().with("flange", flywheel, "flange_a"),
//! ));
//! for _ in 0..10 {
//!     app.world_mut().run_schedule(FixedUpdate);
//! }
//! ```
//!
//! ## Concepts
//! - A [`Driveline`] root entity groups its parts through the [`PartOf`] relationship (the
//!   root lists them in [`DrivelineParts`], in the order that keeps runs deterministic).
//! - A part is an entity with a [`Name`] (the element's name in files and
//!   messages) and one typed component saying what it is, with its parameters as public fields
//!   in SI units: [`Inertia`], [`IdealGear`], [`IdealPlanetary`], [`SpringDamper`],
//!   [`ElastoBacklash`], [`Clutch`] (friction clutches, one-way clutches and brakes),
//!   [`DogClutch`], [`Engine`], [`TorqueConverter`], [`LimitedSlip`], [`Tyre`], [`Mass`] and the
//!   sources ([`parts`] lists them all). Each mirrors a variant of [`ElementKind`](driveline_core::ElementKind), the file
//!   format. Couplings say which flanges they join with [`Connections`], holding the `Entity` of
//!   the other part.
//! - The plugin keeps a compiled network per root ([`DrivelineCache`]): a cache of the
//!   components, which are the truth.
//! - After each step the solver writes [`BodyState`] (inertias and masses), [`CouplingState`]
//!   (elements with a relative coordinate) and [`ClutchEngagement`] (clutches and brakes) back,
//!   and sends [`FrictionModeChanged`] messages with the event time located inside the step.
//! - Run-time inputs (pedals, actuator forces) are [`driveline_core::Signal::Input`] signals set
//!   through [`DrivelineInputs`] on the root, or a clutch's [`ClutchEngagement`].
//! - Whole vehicles: [`vehicle::spawn_vehicle`] spawns a root with one part entity per element of
//!   the vehicle's network ([`vehicle::VehicleParts`] names the engine, the clutch and the wheels)
//!   and its controllers; write a [`vehicle::VehicleInput`] each step and read
//!   [`vehicle::VehicleTelemetry`]. The result is bit for bit that of [`driveline_core::Vehicle`].
//!
//! ## Editing parts
//! The typed components are the truth: edit them as any component (an inspector does), and the
//! next step runs with the new values. Edits are taken in [`DrivelineSystems::Prepare`], before
//! the controllers run: an edit made between ticks or in `Input` applies to this tick's step,
//! one made in `Control` or later to the next.
//! - **A parameter edit** (an inertia, a gear ratio, a clutch's `fn_max`, a friction table, a
//!   spring rate) applies in place: the network is updated without a rebuild, and the motion,
//!   the clock and every controller's state (a vehicle's gear, shift, engine controller, clutch
//!   temperature) carry on. Speeds are projected onto the constraints under the new values (a
//!   changed ratio moves the speeds behind the gear as an impact would), and the friction modes
//!   are selected again: a locked clutch whose new limit is below its torque slips at the next
//!   step. See `driveline_core::Simulation::update_parameters`.
//! - **A structural change** (a part added or removed, a joint or a name changed, an edit that
//!   changes what the solver is made of, such as a friction table that makes a lossless gear
//!   lossy) rebuilds the network *warm*: parts that existed keep their motion and the clock runs
//!   on; a vehicle's controllers start over. A [`DrivelineRebuilt`] message says so, and whether
//!   the new network could start from the old state (`warm`) or had to start from the parts'
//!   start values. A vehicle's controllers find their parts and inputs by name: on a network
//!   that lost one (a part renamed or removed, made another kind, a clutch's force input made
//!   a constant) they refuse to start, a [`DrivelineEditRefused`] on the root says which part,
//!   and the car waits until its parts match again.
//! - **A bad value** (non-finite, or out of the range the element catalogue gives) is refused: a
//!   [`DrivelineEditRefused`] message names the part and the field, and the component is set
//!   back to its last valid value. Nothing panics.
//! - **Writing state**: a [`BodyState`] written before [`DrivelineSystems::Solve`] is the state
//!   the next step starts from (one written before `Prepare` is also what this tick's
//!   controllers see; one written in `Control` or `Actuation` is taken at the start of
//!   `Solve`, after the controllers ran on the state before it). Where the write conflicts with a rigid connection or a lock,
//!   the solver starts from the consistent state nearest to what was written, in the kinetic
//!   energy metric: the written values are kept where the present mode allows, the bodies
//!   rigidly joined to them follow, the others move as little as possible (see
//!   `driveline_core::Simulation::write_state`). Written values that could not be kept are
//!   reported in [`StateWriteAdjusted`] messages. [`vehicle::set_road_speed`] sets a whole
//!   vehicle to a road speed consistently (body, wheels rolling, the driveline through what is
//!   locked, geared or sprung to them).
//!
//! ## A vehicle's entities
//! [`vehicle::spawn_vehicle`] spawns a root and one entity per element of the vehicle's network.
//! Parts are not Bevy children: each points at its root with [`PartOf`], and couplings name the
//! parts their flanges join in [`Connections`]. For the 350Z (a manual):
//!
//! ```text
//! root            Driveline, VehicleDefinition, VehicleParts, VehicleInput, VehicleTelemetry,
//!  |              VehicleController, TransmissionController, DrivelineParts, DrivelineInputs,
//!  |              DrivelineCache (and DrivelineRate, CycleDriver, when you insert them)
//!  +- "engine"         Name, Inertia, BodyState, EngineController,     <- VehicleParts::engine
//!  |                   PartOf(root)
//!  +- "engine_torque"  Name, Engine, Connections(flange -> engine)
//!  +- "clutch"         Name, Clutch, ClutchEngagement, CouplingState,  <- VehicleParts::clutch
//!  |                   ClutchActuator, Connections(flange_a -> engine, flange_b -> disc)
//!  +- "disc", "input_shaft", "idler1".., "output"   Name, Inertia, BodyState
//!  +- "gear1"..        Name, IdealGear, CouplingState, Connections
//!  +- "dog1"..         Name, Clutch, ClutchEngagement, CouplingState,  <- VehicleParts::dogs
//!  |                   ShiftLinkage, Connections (a backlash dog: DogClutch, no engagement)
//!  +- "synchro1"..     Name, Clutch, ClutchEngagement, CouplingState, Connections
//!  +- "final_drive_r"  Name, IdealGear; "diff_r" Name, IdealPlanetary; "diff_r_lsd" Name, LimitedSlip
//!  +- "wheel_fl"..     Name, Inertia, BodyState                        <- VehicleParts::wheels
//!                      (on Road::Chassis also WheelContact, WheelForces)
//!  +- "brake_fl"..     Name, Clutch (ClutchKind::Brake), ClutchEngagement  <- VehicleParts::brakes
//!  +- "tyre_fl"..      Name, Tyre, CouplingState                      <- VehicleParts::tyres
//!  +- "body"           Name, parts::Mass, BodyState                   <- VehicleParts::body
//! ```
//! Every part also carries [`PartElement`] (the element as the solver accepted it) and the
//! state its typed component requires: a body ([`Inertia`], [`parts::Mass`]) its
//! [`BodyState`], every other part its [`CouplingState`]. An automatic has a torque
//! converter, a lock-up clutch ([`vehicle::VehicleParts::lockup`]), planetary sets and its shift
//! elements ([`vehicle::VehicleParts::shift_elements`], [`Clutch`] parts, each with its
//! [`vehicle::HydraulicPiston`]) instead of the clutch and the layshaft box.
//!
//! ## Who writes what
//! | system | set | reads | writes |
//! |---|---|---|---|
//! | your device sampling | `Input` | devices | [`vehicle::VehicleInput`], [`DrivelineInputs`] |
//! | your chassis' ray casts (a vehicle on `Road::Chassis`) | `Input` | your physics engine | [`chassis::WheelContact`] |
//! | edits accepted (one per part type) | `Prepare` | the typed part components | [`PartElement`]; a refused edit set back |
//! | written states taken | `Prepare`, and `Solve` for those written since | [`BodyState`] | the simulation's state |
//! | networks in step with their parts | `Prepare` | [`PartElement`], `Name`, [`Connections`], [`PartOf`] | [`DrivelineCache`] (in place, or rebuilt) |
//! | [`vehicle::control_vehicles`], first: a [`vehicle::CycleDriver`] on the root follows its drive cycle | `Control` | [`vehicle::CycleDriver`], the vehicle's telemetry at the step's start | [`vehicle::CycleDriver`] (its state), [`vehicle::VehicleInput`] |
//! | [`vehicle::control_vehicles`]: controllers built (after a build) and turned on or off; driver input checked; shift controller or TCU; engine controller (idle, limiter, stall, starter, torque reduction) | `Control` | [`vehicle::VehicleDefinition`], [`vehicle::DrivelineRate`], [`vehicle::EngineController`], [`vehicle::TransmissionController`], [`vehicle::ClutchActuator`], [`vehicle::HydraulicPiston`], [`vehicle::ShiftLinkage`], [`vehicle::VehicleInput`], the simulation's state | [`vehicle::VehicleController`] (gear, shift phase, effective throttle, starter); [`vehicle::VehicleTelemetry`] anew when the controllers are built |
//! | your controllers | `Control` | states, telemetry | [`vehicle::VehicleInput`], [`DrivelineInputs`] |
//! | `actuate_vehicles`: shift linkages, clutch actuator, hydraulic pistons, brakes, tyre loads | `Actuation` | [`vehicle::VehicleController`] | the simulation's inputs, [`ClutchEngagement`] |
//! | your actuators | `Actuation` or after it | [`ClutchEngagement`], states | [`ClutchEngagement`], [`DrivelineInputs`] |
//! | inputs and engagements handed over | `Solve` | [`DrivelineInputs`], [`ClutchEngagement`] | the simulation's inputs, over the actuators' |
//! | vehicles: the coupled step, heat, fuel, telemetry (and the later sub-steps of a shift, or of a [`vehicle::DrivelineRate`] faster than the tick) | `Solve` | [`vehicle::VehicleController`], [`chassis::WheelContact`] (taken in `Control`) | [`vehicle::VehicleTelemetry`], [`vehicle::VehicleMessage`], [`chassis::WheelForces`] |
//! | your chassis' forces | after `Solve` | [`chassis::WheelForces`] | your physics engine's forces |
//! | other drivelines: the coupled step | `Solve` | | [`DrivelineCache`] |
//! | write-back (a fleet's vehicles: in their step above) | `Solve` (last) | [`DrivelineCache`] | [`BodyState`], [`CouplingState`], [`ClutchEngagement`] |
//! | your readers | `Integrate` | the new state | |
//! | mode messages | `Telemetry` | [`DrivelineCache`] | [`FrictionModeChanged`], [`DrivelineInputRejected`] |
//!
//! With no system of yours between `Control` and `Solve`, the controllers' and actuators' rows
//! run inside the vehicles' step in `Solve` (see [`FusedVehicleSteps`]).
//!
//! A vehicle's built-in controllers are systems in the public sets, calling the phases of
//! `driveline_core::vehicle::VehicleControl` that `driveline_core::Vehicle::step` calls, in the
//! same order, so the plugin gives the core's bits. Their state (gear, shift phase, engine
//! controller, linkages, pistons, clutch temperature) is the root's
//! [`vehicle::VehicleController`]. To take a controller's place:
//! - **Order a system after it.** The actuators write each clutch and brake part's
//!   [`ClutchEngagement`] in `Actuation`; a system
//!   `.after(DrivelineSystems::Actuation).before(DrivelineSystems::Solve)` that writes another
//!   value wins for the step (example `launch_control`). A run-time input named in the root's
//!   [`DrivelineInputs`] (`engine.throttle`, `lockup.force`, a dog's `engagement`...) is
//!   written over what the controllers and actuators wrote, every step while it is there.
//! - **Remove its component.** Each sits on the entity it drives:
//!   [`vehicle::EngineController`] on the engine part; [`vehicle::ClutchActuator`] on a
//!   manual's clutch part (pedal to normal force); [`vehicle::ShiftLinkage`] on each of a
//!   manual's dog clutches (the sleeve to the dog's engagement and its synchroniser's force);
//!   [`vehicle::HydraulicPiston`] on each of an
//!   automatic's shift elements (the TCU's pressure to normal force);
//!   [`vehicle::TransmissionController`] on the root (the gear selection, linkages and clutch
//!   actuator of a manual; an automatic's TCU with its pistons, lock-up and park pawl). Their
//!   inputs then keep what you write; the others keep working; insert the component again to
//!   hand the job back (example `custom_shift_strategy`).
//!
//! A shift at a step longer than 1 ms is sub-stepped at 1 ms (see
//! `driveline_core::vehicle::VehicleControl::step`): the systems run the first sub-step's
//! control and actuation, and `Solve` runs the whole chain of the sub-steps after it, with your
//! engagements and inputs written over the actuators' in each.
//!
//! **When nothing runs between.** The controllers and actuators are systems so that your
//! systems can run between them and the step. When none does (every other system of the
//! schedule runs before [`vehicle::control_vehicles`] or after `Solve` by its ordering: in
//! `Input`, `Prepare`, `Integrate`, `Telemetry`, or ordered so), the vehicle's step in `Solve`
//! runs its control and actuation itself, as `driveline_core::Vehicle::step` does: the same
//! bits, and each vehicle visited once a tick instead of three times (a fleet of 1,000 cars
//! runs about a fifth faster; docs/performance.md). [`FusedVehicleSteps`] tells which of the two
//! the schedule takes; Bevy decides it each time it builds the schedule, so adding a system
//! in `Actuation` (or one ordered against nothing, which may run anywhere) turns the systems
//! back on from the next tick.
//!
//! ## Scheduling
//! [`DrivelinePlugins`] runs in the schedule you choose (default `FixedUpdate`), in the chained
//! sets of [`DrivelineSystems`]:
//! 1. `Input`: your systems that sample devices into inputs;
//! 2. `Prepare`: the plugin's chain of systems: component edits accepted or refused, written
//!    states taken, networks brought in step with their parts;
//! 3. `Control`: the vehicles' controllers (built after a network build), transmission then
//!    engine; your drivers and controllers (a driver that only samples input belongs in
//!    `Input`: see "When nothing runs between" above);
//! 4. `Actuation`: the vehicles' actuators, yours; they write the simulations' inputs,
//!    [`DrivelineInputs`] and [`ClutchEngagement`];
//! 5. `Solve`: the plugin's chain of systems: states written since `Prepare` taken, inputs
//!    and engagements handed over, the coupled step, vehicle heat, fuel and telemetry, and the
//!    new state written back to the part entities (keep your systems out of it);
//! 6. `Integrate`: your systems that read the new state before the messages go out;
//! 7. `Telemetry`: messages.
//!
//! The step size is the schedule's `Time` delta (the fixed timestep in `FixedUpdate`).
//!
//! The coupled steps of two or more drivelines are spread over the compute task pool (one driveline steps
//! on the calling thread: a hand-off costs more than it saves), the write-back goes driveline
//! by driveline on the calling thread; the vehicles' control and actuation systems go over the
//! pool from 16 vehicles on. A fleet's vehicles (16 or more) step on as many threads as the
//! compute task pool has: the calling thread and a crew of worker threads the plugin keeps for
//! this ([`driveline_core::crew`]: one wake-up a tick, asleep between ticks, the pool's own
//! threads idle meanwhile). From 16 vehicles on two compute threads or more, each vehicle's
//! parts are written in its step, right after it, while its simulation is in the cache (still
//! in `Solve`, before the write-back, which then leaves them). Handing whole systems to
//! workers costs more than it gains here: with one car, most of a tick on a multi-threaded
//! executor is threads waking each other, and a fleet on two threads runs faster when the fixed
//! schedule is single-threaded (its systems still spread their loops over the pool; the figures
//! are in docs/performance.md):
//! `app.edit_schedule(FixedUpdate, |s| { s.set_executor(SingleThreadedExecutor::new()); })`.
//! Without `TaskPoolPlugin` the plugin starts a default compute task pool the first time it runs.
//!
//! Every part's state is written after every step: some 50 entities per vehicle. A fleet that
//! reads only [`vehicle::VehicleTelemetry`] marks the parts [`SkipWriteBack`] (all of a
//! driveline's at once with [`skip_write_back`]); `driveline bench --no-part-states` measures
//! the difference (docs/performance.md has the figures).
//!
//! A fleet's step hints each next vehicle's state toward the cache while it steps the current
//! one, where that pays: [`CacheHints`] measures it now and then and keeps the faster setting
//! (the hints pay where a fleet's state does not fit the last-level cache, and cost where it
//! does); set its policy to always or never to fix it. The motion is the same to the bit either
//! way.
//!
//! ## Reflection and scenes
//! Every public component derives `Reflect` and [`DrivelineCorePlugin`] registers it with
//! `ReflectComponent`, so inspectors can show and edit parts, and a vehicle's entities can be
//! saved as a dynamic world (Bevy 0.19's `DynamicWorld`, the former `DynamicScene`) and loaded
//! again: the parts come back with their names, parameters, joints and root; the plugin builds
//! the network and the controllers from them. The runtime caches are rebuilt, not saved:
//! [`DrivelineCache`] is not reflected, and [`vehicle::VehicleController`] saves as nothing. The
//! state is not saved either: a loaded driveline starts from its parts' start values.
//!
//! ## Plugins
//! | plugin | what it adds |
//! |---|---|
//! | [`DrivelineCorePlugin`] | sets, messages, reflection, the sync of parts and networks, step, write-back |

#![warn(missing_docs)]

pub mod chassis;
mod columns;
mod hints;
mod names;
mod outbox;
pub mod parts;
mod phases;
mod solve;
mod sync;
pub mod vehicle;

use bevy_app::{App, FixedUpdate, Plugin, PluginGroup, PluginGroupBuilder};
use bevy_ecs::intern::Interned;
use bevy_ecs::name::Name;
use bevy_ecs::prelude::*;
use bevy_ecs::schedule::ScheduleLabel;
use bevy_reflect::prelude::*;
use bevy_time::Time;
use driveline_core::{
    BuildError, FrictionMode, IntegrationParameters, Network, NetworkSpec, Scenario, ScenarioError, Simulation,
};
pub use hints::{CacheHintPolicy, CacheHints};
pub use outbox::Outbox;
pub use parts::*;
pub use phases::FusedVehicleSteps;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Common imports.
pub mod prelude {
    // (`Fixed` and `Mass` stay in `parts`: Bevy's `Time<Fixed>` and physics engines' `Mass`
    // share their names.)
    pub use crate::chassis::{WheelContact, WheelForces};
    pub use crate::parts::{
        Clutch, ClutchEngagement, ClutchKind, ConstantTorque, Damper, DogClutch, ElasticClutch, ElastoBacklash,
        ElementComponent, Engine, IdealGear, IdealPlanetary, Inertia, LimitedSlip, LossyGear, PartElement, SignalParam,
        Spring, SpringDamper, TorqueConverter, TorqueSource, Tyre,
    };
    pub use crate::vehicle::{
        ClutchActuator, CycleDriver, DrivelineRate, EngineController, HydraulicPiston, ShiftLinkage,
        TransmissionController, VehicleController, VehicleDefinition, VehicleInput, VehicleMessage, VehicleParts,
        VehicleSnapshotError, VehicleTelemetry, control_vehicles, restore_vehicle, set_road_speed, snapshot_vehicle,
        spawn_vehicle,
    };
    pub use crate::{
        BodyState, CacheHintPolicy, CacheHints, Connections, CouplingState, Driveline, DrivelineBuildFailed,
        DrivelineCommandsExt, DrivelineCorePlugin, DrivelineEditRefused, DrivelineInputRejected, DrivelineInputs,
        DrivelineParts, DrivelinePlugins, DrivelineRebuilt, DrivelineStepFailed, DrivelineSystems, FrictionModeChanged,
        FusedVehicleSteps, HeatPortState, PartOf, SkipWriteBack, SpawnError, StateWriteAdjusted, skip_write_back,
        spawn_scenario,
    };
    pub use driveline_core::{SnapshotError, VehicleSnapshot};
}

/// The chained phases of a driveline step, in order. See the crate docs, "Scheduling".
#[derive(SystemSet, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DrivelineSystems {
    /// Device sampling into inputs (user systems): [`vehicle::VehicleInput`],
    /// [`DrivelineInputs`].
    Input,
    /// The plugin's (one chain of systems): component edits accepted or refused,
    /// written states taken, networks brought in step with their parts (built, edited in
    /// place, rebuilt).
    Prepare,
    /// Drivers and controllers: the vehicles' transmission and engine controllers
    /// ([`vehicle::control_vehicles`]); your own. (With none of yours here, in `Actuation` or
    /// between, the vehicles' controllers run inside their step in `Solve`:
    /// [`FusedVehicleSteps`].)
    Control,
    /// Actuators writing the simulation's inputs and [`ClutchEngagement`]: the vehicles'
    /// linkages, clutch actuators and hydraulics; your own.
    Actuation,
    /// The plugin's chain: states written since `Prepare` taken, inputs and engagements
    /// handed over, the coupled step (vehicles: heat, fuel, telemetry), the write-back. Keep
    /// your systems out of it (before it, or in `Integrate`): the step reads what was written
    /// before it, and the write-back is its last system.
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

/// Sets, messages, reflection, the sync of parts and networks, the step and the write-back.
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
            .add_message::<DrivelineInputRejected>()
            .add_message::<DrivelineBuildFailed>()
            .add_message::<DrivelineStepFailed>()
            .add_message::<DrivelineEditRefused>()
            .add_message::<DrivelineRebuilt>()
            .add_message::<StateWriteAdjusted>()
            .add_message::<vehicle::VehicleMessage>();
        register_types(app);
        app.init_resource::<Book>();
        // Set at each build of the schedule (see `phases`).
        app.init_resource::<FusedVehicleSteps>().register_type::<FusedVehicleSteps>();
        app.init_resource::<CacheHints>().register_type::<CacheHints>().register_type::<CacheHintPolicy>();
        app.edit_schedule(self.schedule, |s| {
            s.add_build_pass(phases::PhasePass);
        });
        app.configure_sets(
            self.schedule,
            (
                DrivelineSystems::Input,
                DrivelineSystems::Prepare,
                DrivelineSystems::Control,
                DrivelineSystems::Actuation,
                DrivelineSystems::Solve,
                DrivelineSystems::Integrate,
                DrivelineSystems::Telemetry,
            )
                .chain(),
        );
        // Each set's systems form one chain; each system spreads its drivelines over the compute
        // task pool itself. (A private schedule for `Solve`, run from an exclusive system, cost
        // its removal from and return to `Schedules` every tick.)
        app.add_systems(
            self.schedule,
            (
                // In the main schedule (a schedule of their own costs a schedule's removal and
                // reinsertion per tick), one after the other.
                (
                    sync::collect_edits,
                    // Written states first, against the state the last step left: an edit
                    // applied in place below may move the state (a projection) under the
                    // components.
                    sync::write_states,
                    sync::sync_networks,
                )
                    .chain()
                    .in_set(DrivelineSystems::Prepare),
                vehicle::control_vehicles.in_set(DrivelineSystems::Control),
                vehicle::actuate_vehicles.in_set(DrivelineSystems::Actuation),
                (
                    // States written in `Control` or `Actuation` (by no system when the
                    // vehicles' phases run in their step).
                    sync::write_states.run_if(|f: Res<FusedVehicleSteps>| !f.is_fused()),
                    sync::hand_over,
                    vehicle::step_vehicles,
                    solve::write_back,
                )
                    .chain()
                    .in_set(DrivelineSystems::Solve),
                solve::send_messages.in_set(DrivelineSystems::Telemetry),
            ),
        );
    }
}

/// Registers every public component and the types they hold for reflection.
fn register_types(app: &mut App) {
    parts::register_all(app);
    app.register_type::<Name>()
        .register_type::<Driveline>()
        .register_type::<PartOf>()
        .register_type::<DrivelineParts>()
        .register_type::<Connections>()
        .register_type::<Connection>()
        .register_type::<BodyState>()
        .register_type::<CouplingState>()
        .register_type::<HeatPortState>()
        .register_type::<SkipWriteBack>()
        .register_type::<DrivelineInputs>();
    vehicle::register_types(app);
    chassis::register_types(app);
}

/// A driveline root. Its parts point at it with [`PartOf`].
#[derive(Component, Reflect, Debug, Clone, Default, Serialize, Deserialize)]
#[reflect(opaque)]
#[reflect(Component, Debug, Clone, Default, Serialize, Deserialize)]
#[require(DrivelineParts, DrivelineCache, DrivelineInputs)]
pub struct Driveline {
    /// Solver tunables.
    pub parameters: IntegrationParameters,
}

/// This part belongs to the driveline root entity `.0`.
#[derive(Component, Reflect, Debug, Clone, Copy, PartialEq, Eq)]
#[reflect(Component, Debug, Clone, PartialEq)]
#[relationship(relationship_target = DrivelineParts)]
pub struct PartOf(pub Entity);

/// The parts of a driveline root, in the order they were added (the stable element order that
/// keeps runs deterministic).
#[derive(Component, Reflect, Debug, Default)]
#[reflect(Component, Debug, Default)]
#[relationship_target(relationship = PartOf, linked_spawn)]
pub struct DrivelineParts(Vec<Entity>);

impl DrivelineParts {
    /// The part entities in element order.
    pub fn parts(&self) -> &[Entity] {
        &self.0
    }
}

/// One flange joint: this part's `flange` to `to_flange` of the part entity `to`. The flange
/// names of parts spawned from a description, and those [`Connections::with`] is given, are
/// stored once per process (borrowed, within a budget of 64 KiB of distinct names), as are the
/// parts' [`Name`]s.
#[derive(Reflect, Debug, Clone, PartialEq, Eq)]
#[reflect(Debug, Clone, PartialEq)]
pub struct Connection {
    /// Flange of this part, e.g. `"flange_a"`.
    pub flange: Cow<'static, str>,
    /// The other part.
    pub to: Entity,
    /// Flange of the other part.
    pub to_flange: Cow<'static, str>,
}

/// Flange joints declared by this part: the relations to the parts its flanges join. Changing
/// them rebuilds the network (see the crate docs, "Editing parts").
#[derive(Component, Reflect, Debug, Clone, Default, PartialEq, Eq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct Connections(#[entities] pub Vec<Connection>);

impl Connections {
    /// No joints.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a joint of this part's `flange` to `to_flange` of `to`.
    pub fn with(mut self, flange: &str, to: Entity, to_flange: &str) -> Self {
        self.0.push(Connection { flange: names::interned(flange), to, to_flange: names::interned(to_flange) });
        self
    }
}

/// Angle (rad or m) and speed (rad/s or m/s) of an inertia or mass part after the last step.
/// Writable: a write before [`DrivelineSystems::Solve`] is the state the next step starts from
/// (see the crate docs, "Editing parts").
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct BodyState {
    /// Angle, rad (position, m, for a Mass).
    pub angle: f64,
    /// Speed, rad/s (m/s for a Mass).
    pub speed: f64,
}

/// Relative angle, relative speed, torque and friction mode of a coupling after the last step.
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct CouplingState {
    /// `phi_rel`, rad.
    pub phi_rel: f64,
    /// `w_rel`, rad/s.
    pub w_rel: f64,
    /// Element torque (MSL convention), N m.
    pub torque: f64,
    /// Friction mode, for friction elements (not reflected: written after every step).
    #[reflect(ignore)]
    pub mode: Option<FrictionMode>,
    /// Power turned into heat, W.
    pub dissipation: f64,
}

/// The thermal reading of a part with a heat port in use after the last step: a thermal
/// element (`HeatCapacitor`, `ThermalConductor`, `Convection`, `FixedTemperature`,
/// `FixedHeatFlow`) or an element whose `heatPort` is connected. Inserted when the part is
/// spawned with such a connection; the dissipated power is [`CouplingState::dissipation`]
/// (or, for parts without a relative coordinate, in `loss_power` here).
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct HeatPortState {
    /// Temperature of the heat port (of `port_a` / `solid` for a conductor or a convection), K.
    pub temperature: f64,
    /// Heat flow through a conductor or convection, from `port_a` / `solid` to `port_b` /
    /// `fluid`, W (0 for other parts).
    pub heat_flow: f64,
    /// Power the part sends into its heat port, W (`lossPower`; 0 for thermal elements).
    pub loss_power: f64,
}

/// Marks a part whose [`BodyState`], [`CouplingState`] and [`ClutchEngagement`] the plugin
/// leaves alone: the write-back skips it (at the archetype level, so it costs nothing per
/// step). The part stays in its driveline and is simulated as before; only its per-part state
/// is not copied out (a [`BodyState`] written to it is still taken as a write).
///
/// Every part is written after every step by default, which for a vehicle means some 50
/// entities per step; a fleet that reads only [`VehicleTelemetry`](crate::vehicle::VehicleTelemetry)
/// saves that work by marking the parts it does not read, for example with
/// [`skip_write_back`]. A vehicle whose parts are all marked is left out of the write-back
/// altogether (no pass over its elements, until a mark is added or removed anywhere): in
/// `driveline bench --no-part-states`, 1,000 8HP sedans on two threads, about a tenth of the
/// fleet's time (docs/performance.md, "Fleets").
#[derive(Component, Reflect, Debug, Clone, Copy, Default, PartialEq, Eq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
#[component(on_insert = skip_write_back_changed, on_remove = skip_write_back_changed)]
pub struct SkipWriteBack;

/// A part gained or lost its [`SkipWriteBack`] (inserted, removed, or despawned): the
/// drivelines look at their parts' marks again (`Book::marks_epoch`).
fn skip_write_back_changed(mut world: bevy_ecs::world::DeferredWorld, _: bevy_ecs::lifecycle::HookContext) {
    if let Some(mut book) = world.get_resource_mut::<Book>() {
        book.marks_epoch += 1;
    }
}

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

/// Run-time input values of a driveline, handed to its simulation in
/// [`DrivelineSystems::Solve`] before every step while they are here. On a vehicle they are
/// written over what its controllers and actuators wrote, in every sub-step: remove an entry
/// to hand the input back to them.
#[derive(Component, Reflect, Debug, Clone, Default, PartialEq)]
#[reflect(Component, Debug, Clone, PartialEq, Default)]
pub struct DrivelineInputs(pub Vec<(String, f64)>);

impl DrivelineInputs {
    /// Sets (or adds) input `name`.
    pub fn set(&mut self, name: &str, value: f64) {
        match self.0.iter_mut().find(|e| e.0 == name) {
            Some(e) => e.1 = value,
            None => self.0.push((name.to_string(), value)),
        }
    }
    /// Removes input `name` (the simulation keeps the value last handed over, until something
    /// else writes it); returns its value.
    pub fn remove(&mut self, name: &str) -> Option<f64> {
        let k = self.0.iter().position(|e| e.0 == name)?;
        Some(self.0.remove(k).1)
    }
}

/// The compiled network and running simulation of a root: a cache of its parts' components,
/// kept in step with them by the plugin (see the crate docs, "Editing parts").
#[derive(Component, Debug, Default)]
pub struct DrivelineCache {
    sim: Option<Simulation>,
    /// Part entity of each element index (each part also holds its index in a `PartSlot`).
    parts: Vec<Entity>,
    /// Where each part of `parts` was last written (the fleet's write-back, `columns`).
    places: Vec<columns::PartPlace>,
    /// The book's `claims_epoch` at which every part of `parts` was claimed by this driveline,
    /// as the fleet's write-back last found (`u64::MAX`, or any other count: to be checked part
    /// by part).
    claimed_whole: std::sync::atomic::AtomicU64,
    /// Whether every part of `parts` is marked [`SkipWriteBack`] (the lowest bit), as the
    /// fleet's write-back found at the book's `marks_epoch` (the other bits; `u64::MAX`: not
    /// looked at since the build). A driveline whose parts are all marked is left out of the
    /// write-back without a pass over its elements.
    marks: std::sync::atomic::AtomicU64,
    /// Number of builds so far (controllers that resolved element indices rebuild on change).
    generation: u64,
    /// A part's element was accepted in place since the last sync: parameters to update.
    edited: bool,
    /// A part's element was inserted since the last sync: the network to rebuild.
    restructured: bool,
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
    /// Increments on every (re)build of the network (not on a parameter edit applied in place).
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// The part entity of element `k` of the network.
    pub fn part(&self, k: usize) -> Option<Entity> {
        self.parts.get(k).copied()
    }
    /// The simulation, if `part` is element `k` of its last build.
    fn simulation_of(&self, part: Entity, k: usize) -> Option<&Simulation> {
        self.sim.as_ref().filter(|_| self.parts.get(k) == Some(&part))
    }
}

/// What the plugin's systems hand one another about the drivelines, outside the components:
/// one resource, so that each system fetches one (a resource fetch costs some tens of
/// instructions a tick).
#[derive(Resource, Default)]
struct Book {
    /// The roots whose cache a hook or an accepted edit marked since the last sync (see
    /// `DrivelineCache::edited` and `restructured`), so that the sync visits those, not every
    /// root.
    marks: Vec<Entity>,
    /// Which driveline may write each part's state in the fleet's write-back, by the part's
    /// entity index: the root whose last build listed it (set by the sync at each build, the
    /// only place a driveline's part list is made). A part's entity is listed by one driveline
    /// at a time, and the write-back writes a part only from the driveline this names, so no
    /// two drivelines written at once on different threads reach one part. A dense table: the
    /// parts of a car are spawned together, so their entries share cache lines (a part's
    /// `PartOf` is a row of its own table, one cache miss a part).
    claims: Vec<Entity>,
    /// Counts the changes of `claims` (one per build): a driveline that found every part of its
    /// list claimed by it at this count skips the check per part until the next change
    /// (`DrivelineCache::claimed_whole`).
    claims_epoch: u64,
    /// Counts the insertions and removals of [`SkipWriteBack`] on any part (its hooks, a
    /// despawn included): what a driveline found of its parts' marks at this count holds until
    /// the next one (`DrivelineCache::marks`; a build resets the driveline's own record).
    marks_epoch: u64,
    /// The drivelines whose last step left mode events or input rejections to send (noted by
    /// the parallel steps), so that [`solve::send_messages`] visits those alone, not every
    /// driveline's simulation.
    notes: Notes<Entity>,
    /// Whether the last `Solve` wrote the vehicles' parts in their step (a fleet on two
    /// compute threads or more), so that the write-back leaves them.
    vehicles_written: std::sync::atomic::AtomicBool,
    /// Whether the world has drivelines that are not vehicles (as the last `Solve` found).
    has_others: std::sync::atomic::AtomicBool,
    /// When the write-back last ran: a [`ClutchEngagement`] changed after it was written by a
    /// user (the write-back's own writes carry this tick, a fleet's vehicles' writes in their
    /// step an earlier one of the same `Solve`).
    last_write_back: bevy_ecs::change_detection::Tick,
    /// When written [`BodyState`]s were last taken (in `Prepare`, and again in `Solve`): a
    /// state changed before it has been taken.
    states_taken: bevy_ecs::change_detection::Tick,
    /// [`FusedVehicleSteps`]'s answer, set with it when the schedule is built.
    fused: bool,
}

impl Book {
    /// Notes that `root`'s cache was marked.
    fn mark(world: &mut bevy_ecs::world::DeferredWorld, root: Entity) {
        if let Some(mut book) = world.get_resource_mut::<Book>() {
            book.marks.push(root);
        }
    }

    /// Notes that `root`'s build lists `parts` (its last build listed `before`: those it no
    /// longer lists are released, unless another driveline claimed them since).
    fn claim(&mut self, root: Entity, before: &[Entity], parts: &[Entity]) {
        self.claims_epoch += 1;
        for part in before {
            if let Some(claim) = self.claims.get_mut(part.index_u32() as usize)
                && *claim == root
            {
                *claim = Entity::PLACEHOLDER;
            }
        }
        for part in parts {
            let i = part.index_u32() as usize;
            if self.claims.len() <= i {
                self.claims.resize(i + 1, Entity::PLACEHOLDER);
            }
            self.claims[i] = root;
        }
    }

    /// Whether `root` may write `part`.
    #[inline(always)]
    fn claimed_by(&self, part: Entity, root: Entity) -> bool {
        self.claims.get(part.index_u32() as usize) == Some(&root)
    }

    /// The driveline whose last build listed `part`'s entity index, if any.
    fn claim_of(&self, part: Entity) -> Option<Entity> {
        self.claims.get(part.index_u32() as usize).copied().filter(|&root| root != Entity::PLACEHOLDER)
    }

    /// Notes `root` if its simulation's last step has something to send.
    fn note(&self, root: Entity, sim: &Simulation) {
        if !sim.events().is_empty() || !sim.input_rejections().is_empty() {
            self.notes.push(root);
        }
    }
}

/// What the parallel passes collect: each thread's own list (no lock shared by the threads),
/// and whether anything was pushed at all, so that a tick that collected nothing does not
/// visit the threads' lists.
pub(crate) struct Notes<T: Send> {
    lists: bevy_utils::Parallel<Vec<T>>,
    any: std::sync::atomic::AtomicBool,
}

impl<T: Send> Default for Notes<T> {
    fn default() -> Self {
        Notes { lists: Default::default(), any: Default::default() }
    }
}

impl<T: Send> Notes<T> {
    /// Adds `item` to the calling thread's list.
    pub(crate) fn push(&self, item: T) {
        self.lists.borrow_local_mut().push(item);
        self.any.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Moves everything pushed to the end of `out` (the threads' lists keep their room).
    pub(crate) fn drain_into(&mut self, out: &mut Vec<T>) {
        if std::mem::take(self.any.get_mut()) {
            self.lists.drain_into(out);
        }
    }
}

/// A part's element index in its driveline's network, set at each build (the build's
/// commands apply at the sync point after `Prepare`, before the step and the write-back), so
/// that the write-back finds the element without a search; parts spawned from a description
/// carry it from their spawn. Checked against the cache: a part that the last build did not
/// include is skipped.
#[derive(Component, Debug, Clone, Copy)]
struct PartSlot(usize);

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

/// A value written to a driveline's [`DrivelineInputs`] that the run-time input policy did not
/// take as given: past +-`driveline_core::limits::SIGNAL` (an infinity included) it was
/// clamped, a NaN kept the input's last valid value. Sent once per episode (until the input is
/// next written a valid value), after the step it applied to.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct DrivelineInputRejected {
    /// The driveline root.
    pub driveline: Entity,
    /// The input's name.
    pub input: String,
    /// The value written.
    pub value: f64,
    /// The value used instead.
    pub used: f64,
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

/// An edit was refused and the last valid value kept: a typed part component set to a
/// non-finite or out-of-range value (the message names the part and the field), a non-finite
/// [`BodyState`] or [`ClutchEngagement`]. The vehicles' parallel passes (in `Control` and
/// `Solve`) send theirs vehicle by vehicle in entity order, each vehicle's in the order they
/// were found, whatever thread stepped it.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct DrivelineEditRefused {
    /// The driveline root, if the part belongs to one.
    pub driveline: Option<Entity>,
    /// The part.
    pub part: Entity,
    /// What is wrong, what is allowed, and what was kept.
    pub message: String,
}

/// A driveline's network was rebuilt because its structure changed (parts added or removed,
/// joints or names changed, an edit the solver cannot apply in place). A vehicle's controllers
/// start over after a rebuild.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct DrivelineRebuilt {
    /// The driveline root.
    pub driveline: Entity,
    /// The new network started from the old state (parts that existed kept their motion and
    /// the clock ran on). `false`: it could not, and started from the parts' start values at
    /// t = 0.
    pub warm: bool,
    /// What changed.
    pub reason: String,
}

/// A written [`BodyState`] value the state could not take as written (a rigid connection, a
/// lock or another write ties it): what was written and what the next step starts from.
#[derive(Message, Debug, Clone, PartialEq)]
pub struct StateWriteAdjusted {
    /// The driveline root.
    pub driveline: Entity,
    /// The body part.
    pub part: Entity,
    /// `"angle"` or `"speed"`.
    pub what: &'static str,
    /// The value written.
    pub written: f64,
    /// The value the state starts from.
    pub kept: f64,
}

/// Why a driveline or vehicle could not be spawned. Nothing is left spawned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpawnError {
    /// The scenario's signals or references do not resolve.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The network does not build (the message says what is wrong and what is allowed).
    #[error(transparent)]
    Network(#[from] BuildError),
    /// The vehicle description is invalid, or its gearbox file could not be read.
    #[error(transparent)]
    Vehicle(#[from] driveline_core::vehicle::VehicleError),
}

/// Spawns a scenario as a root with one part per element (a [`Name`] and its typed component)
/// and their joints. Returns the root; fails, with nothing spawned, when the scenario does not
/// resolve or its network does not build.
pub fn spawn_scenario(world: &mut World, scenario: &Scenario) -> Result<Entity, SpawnError> {
    let root = world.spawn_empty().id();
    spawn_scenario_on(world, root, scenario).inspect_err(|_| {
        world.despawn(root);
    })?;
    Ok(root)
}

/// [`spawn_scenario`] onto the empty entity `root`.
fn spawn_scenario_on(world: &mut World, root: Entity, scenario: &Scenario) -> Result<(), SpawnError> {
    let spec = scenario.resolved_spec()?;
    Network::build(&spec)?;
    world.entity_mut(root).insert(Driveline::default());
    spawn_network(world, root, &spec, None);
    Ok(())
}

/// Spawns one part entity per element of a built `spec` under `root`, with their joints. The
/// parts of a vehicle (`spec` the network of `layout`) refer to the elements of its shared
/// layout.
pub(crate) fn spawn_network<'a>(
    world: &mut World,
    root: Entity,
    spec: &'a NetworkSpec,
    layout: Option<&std::sync::Arc<driveline_core::vehicle::build::Layout>>,
) -> Vec<Entity> {
    let ids: Vec<Entity> = spec
        .elements
        .iter()
        .enumerate()
        .map(|(k, e)| {
            // (The slot the first build gives it, in the spawn: set later, every part of a fleet
            // would move tables at once, and the tables they left keep their room.)
            let mut part = world.spawn((Name::new(names::interned(&e.name)), PartOf(root), PartSlot(k)));
            insert_typed(&mut part, &e.kind);
            if let Some(layout) = layout {
                part.insert(PartElement::shared(layout.clone(), k));
            }
            part.id()
        })
        .collect();
    // The spec was built: every connection names an element and a flange.
    let find = |s: &'a str| {
        let (el, fl) = s.split_once('.').unwrap_or((s, ""));
        spec.elements.iter().position(|e| e.name == el).map(|i| (i, fl))
    };
    for (i, e) in spec.elements.iter().enumerate() {
        let ports = e.kind.heat_ports();
        let joined = spec.connections.iter().any(|(a, b)| {
            [a, b].iter().any(|s| s.split_once('.').is_some_and(|(el, p)| el == e.name && ports.contains(&p)))
        });
        if joined {
            world.entity_mut(ids[i]).insert(HeatPortState::default());
        }
    }
    // Each part's joints in one list of their number, in the order of the description.
    let joints: Vec<_> = spec.connections.iter().filter_map(|(a, b)| Some((find(a)?, find(b)?))).collect();
    let mut count = vec![0usize; ids.len()];
    joints.iter().for_each(|((i, _), _)| count[*i] += 1);
    for (i, &n) in count.iter().enumerate().filter(|(_, n)| **n > 0) {
        let mut list = Vec::with_capacity(n);
        for &((_, fa), (j, fb)) in joints.iter().filter(|((a, _), _)| *a == i) {
            list.push(Connection { flange: names::interned(fa), to: ids[j], to_flange: names::interned(fb) });
        }
        world.entity_mut(ids[i]).insert(Connections(list));
    }
    ids
}

/// Spawning drivelines and vehicles from inside systems, through [`Commands`]: the root entity
/// is reserved at once and filled when the commands apply. A description that fails is
/// reported as a [`DrivelineBuildFailed`] message for the reserved root, which stays empty.
pub trait DrivelineCommandsExt {
    /// [`vehicle::spawn_vehicle`] as a command.
    fn spawn_vehicle(
        &mut self,
        spec: driveline_core::VehicleSpec,
        road: driveline_core::vehicle::Road,
    ) -> EntityCommands<'_>;
    /// [`spawn_scenario`] as a command.
    fn spawn_scenario(&mut self, scenario: Scenario) -> EntityCommands<'_>;
}

impl DrivelineCommandsExt for Commands<'_, '_> {
    fn spawn_vehicle(
        &mut self,
        spec: driveline_core::VehicleSpec,
        road: driveline_core::vehicle::Road,
    ) -> EntityCommands<'_> {
        let root = self.spawn_empty().id();
        self.queue(move |world: &mut World| {
            if let Err(e) = vehicle::spawn_vehicle_on(world, root, spec, road) {
                world.write_message(DrivelineBuildFailed { driveline: root, message: e.to_string() });
            }
        });
        self.entity(root)
    }

    fn spawn_scenario(&mut self, scenario: Scenario) -> EntityCommands<'_> {
        let root = self.spawn_empty().id();
        self.queue(move |world: &mut World| {
            if let Err(e) = spawn_scenario_on(world, root, &scenario) {
                world.write_message(DrivelineBuildFailed { driveline: root, message: e.to_string() });
            }
        });
        self.entity(root)
    }
}

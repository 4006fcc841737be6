//! Vehicles in the ECS: a vehicle is a [`Driveline`] root whose parts (engine, clutch, idlers,
//! dogs, synchronisers, differentials, wheels, tyres, brakes, body) are entities like any other,
//! plus the controllers on the root ([`VehicleController`]) that turn a [`VehicleInput`] into the
//! network's run-time inputs every step, and a [`VehicleTelemetry`] written after it.
//!
//! The controllers run inside the solve phase ([`crate::DrivelineSolveSchedule`]): after a
//! topology rebuild, before the coupled step, and right after it; they work on the freshly built
//! simulation so that even the first step sees the right clutch, tyre and pedal inputs.

use crate::{Driveline, DrivelineCache, DrivelineStepFailed, spawn_network};
use bevy_ecs::prelude::*;
use driveline_core::IntegrationParameters;
use driveline_core::vehicle::{DriverInput, Road, Telemetry, VehicleControl, VehicleEvent, VehicleSpec, build};

/// The vehicle's controllers (shift controller, engine controller, linkages, clutch heat),
/// created from its description once the network is built and again after every rebuild.
#[derive(Component)]
pub struct VehicleController {
    spec: VehicleSpec,
    layout: build::Layout,
    road: Road,
    control: Option<VehicleControl>,
    generation: u64,
}

impl VehicleController {
    /// The controllers, once the network has been built.
    pub fn control(&self) -> Option<&VehicleControl> {
        self.control.as_ref()
    }
    /// The description.
    pub fn spec(&self) -> &VehicleSpec {
        &self.spec
    }
    /// Events of the last step (shifts, blocked dogs, stalls...).
    pub fn events(&self) -> &[VehicleEvent] {
        self.control.as_ref().map_or(&[], |c| c.events())
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
#[derive(Component, Debug, Clone, Copy, Default, PartialEq)]
pub struct VehicleInput(pub DriverInput);

/// The vehicle's outputs after the last step.
#[derive(Component, Debug, Clone, Copy, Default, PartialEq)]
pub struct VehicleTelemetry(pub Telemetry);

/// Spawns a vehicle: a [`Driveline`] root with its controllers, input and telemetry, and one
/// part entity per element of its network. Fails with the validation message on a bad
/// description.
pub fn spawn_vehicle(world: &mut World, mut spec: VehicleSpec, road: Road) -> Result<Entity, String> {
    // An automatic's gearbox file not loaded yet is read relative to the working directory.
    if let Some(at) = &mut spec.automatic {
        at.resolve(std::path::Path::new(".")).map_err(|e| e.to_string())?;
    }
    spec.validate().map_err(|e| format!("{}: {}", e.path.join("."), e.message))?;
    let layout = build::layout(&spec, road);
    let root = world
        .spawn((
            Driveline { parameters: IntegrationParameters::vehicle() },
            VehicleController { spec, layout: layout.clone(), road, control: None, generation: 0 },
            VehicleInput::default(),
            VehicleTelemetry::default(),
        ))
        .id();
    spawn_network(world, root, &layout.spec)?;
    Ok(root)
}

/// One step of every vehicle, in parallel across the compute task pool: control and
/// actuation ((re)creating the controllers after a rebuild, then writing the inputs), the
/// coupled step, then heat, fuel and telemetry, back to back on one thread (one parallel pass
/// over the vehicles, not three). Failures are reported in entity order; then the step's
/// vehicle events as [`VehicleMessage`]s, vehicle by vehicle in entity order.
pub(crate) fn step_vehicles(
    time: Res<bevy_time::Time>,
    mut roots: Query<(Entity, &mut VehicleController, &VehicleInput, &mut VehicleTelemetry, &mut DrivelineCache)>,
    mut failed: MessageWriter<DrivelineStepFailed>,
    mut messages: MessageWriter<VehicleMessage>,
    mut failures: Local<std::sync::Mutex<Vec<DrivelineStepFailed>>>,
) {
    let dt = time.delta_secs_f64();
    let sink = &*failures;
    let fail = |root, e: driveline_core::StepError| {
        let f = DrivelineStepFailed { driveline: root, message: e.to_string() };
        sink.lock().unwrap_or_else(|p| p.into_inner()).push(f);
    };
    roots.par_iter_mut().for_each(|(root, mut vc, input, mut tele, mut cache)| {
        let generation = cache.generation();
        let Some(sim) = cache.simulation_mut() else { return };
        if vc.control.is_none() || vc.generation != generation {
            let mut control = VehicleControl::new(vc.spec.clone(), vc.layout.clone(), vc.road, sim);
            control.start(sim);
            vc.control = Some(control);
            vc.generation = generation;
        }
        if dt <= 0.0 {
            return;
        }
        let control = vc.control.as_mut().expect("created above");
        // The same step as the core `Vehicle`'s (shifts sub-stepped at game steps); a refused
        // step leaves the state where it was, and the controllers still see its end.
        if let Err(e) = control.step(sim, &input.0, dt) {
            fail(root, e);
        }
        tele.0 = *control.telemetry();
    });
    crate::flush_failures(&mut failures, &mut failed);
    // Query iteration order is the archetype table order, fixed for a given world history.
    for (root, vc, ..) in &roots {
        for e in vc.events() {
            messages.write(VehicleMessage { vehicle: root, event: *e });
        }
    }
}

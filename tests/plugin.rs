//! The Bevy plugin solves the same network as the core, bit for bit: entities spawned from a
//! scenario give the same states and mode messages as a bare `Simulation`; topology changes
//! rebuild the network; invalid part sets are reported, not panicked on.

mod common;
use bevy_app::{App, FixedUpdate};
use bevy_ecs::entity::Entity;
use bevy_ecs::message::Messages;
use bevy_ecs::name::Name;
use bevy_ecs::prelude::IntoScheduleConfigs;
use common::*;
use driveline::bevy::prelude::*;
use driveline::core::Signal;
use std::time::Duration;

/// A driveline root with one flywheel part of inertia `j` (kg m^2) at rest.
fn flywheel(app: &mut App, j: f64) -> (Entity, Entity) {
    let world = app.world_mut();
    let root = world.spawn(Driveline::default()).id();
    let part = Inertia { j, phi_start: Some(0.0), w_start: Some(0.0) };
    let wheel = world.spawn((Name::new("J"), part, PartOf(root))).id();
    (root, wheel)
}

/// A torque source part of constant `tau` (N m) on `on`'s `flange_a`, in `root`'s driveline.
fn motor(app: &mut App, root: Entity, on: Entity, tau: f64) -> Entity {
    named_motor(app, root, on, tau, "motor")
}

/// [`motor`] named `name` (a driveline's part names are its own).
fn named_motor(app: &mut App, root: Entity, on: Entity, tau: f64, name: &'static str) -> Entity {
    app.world_mut()
        .spawn((
            Name::new(name),
            TorqueSource { tau: SignalParam(Signal::Constant(tau)), use_support: false },
            PartOf(root),
            Connections::new().with("flange", on, "flange_a"),
        ))
        .id()
}

#[test]
fn entities_match_the_core_bit_for_bit() {
    let (scenario, mut sim) = load("CoupledClutches");
    let mut app = create_app();
    let root = spawn_scenario(app.world_mut(), &scenario).unwrap();
    let mut core_events = Vec::new();
    let mut app_events = Vec::new();
    for k in 0..1500 {
        sim.step(1e-3).unwrap();
        core_events.extend(sim.events().iter().map(|e| (e.time, e.from, e.to)));
        fixed_step(&mut app, Duration::from_millis(1));
        if k % 2 == 1 {
            // A tick of zero length steps nothing, so it sends no mode change again.
            fixed_step(&mut app, Duration::ZERO);
        }
        app_events.extend(
            app.world_mut().resource_mut::<Messages<FrictionModeChanged>>().drain().map(|m| (m.time, m.from, m.to)),
        );
    }
    assert_eq!(core_events.len(), 9);
    assert_eq!(core_events, app_events);
    let parts = app.world().get::<DrivelineParts>(root).unwrap().parts().to_vec();
    let j4 = parts.iter().copied().find(|&e| app.world().get::<Name>(e).unwrap().as_str() == "J4").unwrap();
    let state = app.world().get::<BodyState>(j4).unwrap();
    assert_eq!(state.speed.to_bits(), speed(&sim, "J4").to_bits());
    let clutch1 = parts.iter().copied().find(|&e| app.world().get::<Name>(e).unwrap().as_str() == "clutch1").unwrap();
    assert_eq!(app.world().get::<CouplingState>(clutch1).unwrap().mode.unwrap().code(), 2);
}

#[test]
fn the_first_tick_builds_steps_and_writes_back() {
    // The tick that builds a network also writes its state back: a flywheel under a constant
    // 2 N m torque (J = 0.5 kg m^2) turns at a = 4 rad/s^2 after its first 1 ms step.
    let mut app = create_app();
    let (root, wheel) = flywheel(&mut app, 0.5);
    motor(&mut app, root, wheel, 2.0);
    fixed_step(&mut app, Duration::from_millis(1));
    let w = app.world().get::<BodyState>(wheel).unwrap().speed;
    // One exact step of a linear mode: rounding only.
    assert!((w - 4e-3).abs() < 1e-15, "{w}");
}

#[test]
fn parts_marked_skip_write_back_keep_their_state_while_the_rest_is_written() {
    // Two flywheels under the same 2 N m: one written back, one marked. Both are simulated
    // (the marked one's motion still shows in the solver), only the marked part's components
    // stay as they were.
    let mut app = create_app();
    let (root, written) = flywheel(&mut app, 0.5);
    let written_motor = motor(&mut app, root, written, 2.0);
    let (root2, skipped) = flywheel(&mut app, 0.5);
    let skipped_motor = motor(&mut app, root2, skipped, 2.0);
    skip_write_back(app.world_mut(), root2);
    for _ in 0..10 {
        fixed_step(&mut app, Duration::from_millis(1));
    }
    // a = 4 rad/s^2 for 10 ms; one exact step per tick of a linear mode: rounding only.
    let w = app.world().get::<BodyState>(written).unwrap().speed;
    assert!((w - 0.04).abs() < 1e-14, "{w}");
    assert_eq!(*app.world().get::<BodyState>(skipped).unwrap(), BodyState::default());
    // (A body carries a BodyState only, a coupling such as the motor a CouplingState only.)
    assert!(app.world().get::<CouplingState>(skipped).is_none());
    assert!(app.world().get::<BodyState>(skipped_motor).is_none());
    assert!(app.world().get::<BodyState>(written_motor).is_none());
    // Unmarked again, it is written at the next step with the motion it had all along.
    app.world_mut().entity_mut(skipped).remove::<SkipWriteBack>();
    fixed_step(&mut app, Duration::from_millis(1));
    let (w1, w2) =
        (app.world().get::<BodyState>(written).unwrap().speed, app.world().get::<BodyState>(skipped).unwrap().speed);
    assert_eq!(w1.to_bits(), w2.to_bits());
}

#[test]
fn adding_a_part_rebuilds_and_a_bad_part_is_reported() {
    let mut app = create_app();
    let (root, j) = flywheel(&mut app, 2.0);
    fixed_step(&mut app, Duration::from_millis(10));
    // A constant 4 N m on J = 2 kg m^2: w = 2 t after it is added.
    motor(&mut app, root, j, 4.0);
    for _ in 0..100 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    let w = app.world().get::<BodyState>(j).unwrap().speed;
    // The rebuilt network starts from the parts' start values and runs 100 steps of 10 ms.
    assert!((w - 2.0).abs() < 1e-12, "w = {w}");
    // A clutch with a dangling flange: reported as a message, the driveline stops, no panic.
    app.world_mut().spawn((
        Name::new("c"),
        Clutch { fn_max: 1.0, f_normalized: SignalParam(Signal::Constant(1.0)), ..Default::default() },
        PartOf(root),
        Connections::new().with("flange_a", j, "flange_b"),
    ));
    fixed_step(&mut app, Duration::from_millis(10));
    let failures: Vec<String> =
        app.world_mut().resource_mut::<Messages<DrivelineBuildFailed>>().drain().map(|m| m.message).collect();
    assert!(failures.iter().any(|m| m.contains("c.flange_b") && m.contains("not connected")), "{failures:?}");
}

#[test]
fn inputs_reach_the_solver_and_bad_values_are_refused() {
    let mut app = create_app();
    let (root, j) = flywheel(&mut app, 1.0);
    app.world_mut().spawn((
        Name::new("motor"),
        TorqueSource {
            tau: SignalParam(Signal::Input { name: "throttle".into(), value: 0.0, rate: 0.0, since: 0.0 }),
            use_support: false,
        },
        PartOf(root),
        Connections::new().with("flange", j, "flange_a"),
    ));
    app.world_mut().get_mut::<DrivelineInputs>(root).unwrap().set("throttle", 3.0);
    for _ in 0..10 {
        fixed_step(&mut app, Duration::from_millis(100));
    }
    let w = app.world().get::<BodyState>(j).unwrap().speed;
    assert!((w - 3.0).abs() < 1e-12, "w = {w}");
    app.world_mut().get_mut::<DrivelineInputs>(root).unwrap().set("throttle", f64::NAN);
    fixed_step(&mut app, Duration::from_millis(100));
    let w2 = app.world().get::<BodyState>(j).unwrap().speed;
    // NaN refused: the last good value (3 N m) still acts, and the policy says so once
    // although the NaN is handed over at every step.
    assert!((w2 - 3.3).abs() < 1e-12, "w = {w2}");
    fixed_step(&mut app, Duration::from_millis(100));
    let rejected: Vec<DrivelineInputRejected> =
        app.world_mut().resource_mut::<Messages<DrivelineInputRejected>>().drain().collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert!(rejected[0].input == "throttle" && rejected[0].value.is_nan() && rejected[0].used == 3.0);
    // An infinity is clamped to the signal range and taken (a new episode after a valid value).
    app.world_mut().get_mut::<DrivelineInputs>(root).unwrap().set("throttle", 1.0);
    fixed_step(&mut app, Duration::from_millis(100));
    app.world_mut().get_mut::<DrivelineInputs>(root).unwrap().set("throttle", f64::INFINITY);
    fixed_step(&mut app, Duration::from_millis(100));
    let rejected: Vec<DrivelineInputRejected> =
        app.world_mut().resource_mut::<Messages<DrivelineInputRejected>>().drain().collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0].used, driveline::core::limits::SIGNAL);
    // A name the network does not have is a build failure.
    app.world_mut().get_mut::<DrivelineInputs>(root).unwrap().set("brake", 1.0);
    fixed_step(&mut app, Duration::from_millis(100));
    let failures: Vec<String> =
        app.world_mut().resource_mut::<Messages<DrivelineBuildFailed>>().drain().map(|m| m.message).collect();
    assert!(failures.iter().any(|m| m.contains("brake")), "{failures:?}");
}

#[test]
fn driveline_systems_have_no_order_ambiguities() {
    use bevy_ecs::schedule::{LogLevel, ScheduleBuildSettings};
    let mut app = create_app();
    app.edit_schedule(FixedUpdate, |s| {
        s.set_build_settings(ScheduleBuildSettings { ambiguity_detection: LogLevel::Error, ..Default::default() });
    });
    let (scenario, _) = load("SimpleGearShift");
    spawn_scenario(app.world_mut(), &scenario).unwrap();
    // Building the schedule with ambiguity detection as an error panics on any ambiguity.
    fixed_step(&mut app, Duration::from_millis(1));
}

#[test]
fn a_rebuild_keeps_the_motion_and_the_clock() {
    // Flywheel J = 2 spun by 4 N m: w = 2 t. At t = 0.5 s a second flywheel is coupled through
    // a damper; the rebuilt network starts from w = 1 rad/s at t = 0.5 s, not from rest at 0.
    let mut app = create_app();
    let (root, j) = flywheel(&mut app, 2.0);
    motor(&mut app, root, j, 4.0);
    for _ in 0..50 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    let w_before = app.world().get::<BodyState>(j).unwrap().speed;
    assert!((w_before - 1.0).abs() < 1e-12, "{w_before}");
    let world = app.world_mut();
    let j2 =
        world.spawn((Name::new("J2"), Inertia { j: 2.0, phi_start: Some(0.0), w_start: Some(0.0) }, PartOf(root))).id();
    world.spawn((
        Name::new("coupling"),
        Damper { d: 1e-9, phi_rel_start: None, w_rel_start: None },
        PartOf(root),
        Connections::new().with("flange_a", j, "flange_b").with("flange_b", j2, "flange_a"),
    ));
    fixed_step(&mut app, Duration::from_millis(10));
    let w_after = app.world().get::<BodyState>(j).unwrap().speed;
    // One more 10 ms step at 2 rad/s^2 (the 1e-9 damper is negligible: < 1e-9 rad/s).
    assert!((w_after - 1.02).abs() < 1e-8, "{w_after}");
    let cache = app.world().get::<driveline::bevy::DrivelineCache>(root).unwrap();
    assert!((cache.simulation().unwrap().time() - 0.51).abs() < 1e-12);
}

#[test]
fn a_spawned_vehicle_drives_like_the_core_vehicle_bit_for_bit() {
    use driveline::core::vehicle::{Road, Vehicle};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/nissan_350z.ron");
    let mut core = Vehicle::load(&path).unwrap();
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), core.spec().clone(), Road::Body).unwrap();
    // Every element of the network is a part entity.
    let parts = app.world().get::<DrivelineParts>(root).unwrap().parts().len();
    assert_eq!(parts, core.simulation().network().elements.len());
    let mut input = driveline::core::DriverInput { clutch: 1.0, gear: 1, ..Default::default() };
    for k in 0..3000 {
        let t = k as f64 * 1e-3;
        input.clutch = if t < 1.2 { 1.0 } else { (1.0 - (t - 1.2)).max(0.0) };
        input.throttle = if t < 1.2 { 0.0 } else { 0.3 };
        core.step(&input, 1e-3).unwrap();
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        fixed_step(&mut app, Duration::from_millis(1));
    }
    let ecs = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    let c = core.telemetry();
    assert!(c.speed > 1.0, "the car should be moving: {}", c.speed);
    assert_eq!(ecs.speed.to_bits(), c.speed.to_bits());
    assert_eq!(ecs.engine_rpm.to_bits(), c.engine_rpm.to_bits());
    assert_eq!(ecs.engaged_gear, 1);
}

#[test]
fn a_spawned_automatic_shifts_like_the_core_one_and_reports_its_shifts() {
    use driveline::bevy::prelude::VehicleMessage;
    use driveline::core::vehicle::{Road, Vehicle, VehicleEventKind};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let mut core = Vehicle::load(&path).unwrap();
    let mut app = create_app();
    // The loaded description carries its gearbox inline: the ECS needs no file.
    let root = spawn_vehicle(app.world_mut(), core.spec().clone(), Road::Body).unwrap();
    let mut input = held_in_drive();
    let mut reports = Vec::new();
    for k in 0..6000 {
        if k == 1000 {
            input.brake = 0.0;
            input.throttle = 1.0;
        }
        core.step(&input, 1e-3).unwrap();
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        fixed_step(&mut app, Duration::from_millis(1));
        for m in app.world_mut().resource_mut::<Messages<VehicleMessage>>().drain() {
            assert_eq!(m.vehicle, root);
            if let VehicleEventKind::ShiftCompleted { report: Some(r), .. } = m.event.kind {
                reports.push(r);
            }
        }
    }
    let ecs = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    let c = core.telemetry();
    assert!(c.engaged_gear >= 2, "gear {}", c.engaged_gear);
    assert_eq!(ecs.speed.to_bits(), c.speed.to_bits());
    assert_eq!(ecs.turbine_rpm.to_bits(), c.turbine_rpm.to_bits());
    assert_eq!(ecs.engaged_gear, c.engaged_gear);
    // The garage shift into 1st and the 1-2 upshift, with their figures.
    assert!(reports.iter().any(|r| r.from == 1 && r.to == 2 && r.duration > 0.0), "{reports:?}");
}

/// At a game's 60 Hz the plugin steps a vehicle exactly as the core `Vehicle` does, shifts
/// (sub-stepped at 1 ms inside the frame) included: the 350Z through 1-2 and 2-3, the 8HP sedan
/// through its first upshifts.
/// Both ways the plugin runs a vehicle's phases: inside its step (the default schedule) and as
/// systems in `Control` and `Actuation` (a system of the user's in `Actuation` asks for it).
#[test]
fn at_60_hz_the_plugin_shifts_like_the_core_vehicle_bit_for_bit() {
    use driveline::core::automatic::Selector;
    use driveline::core::vehicle::{Road, Vehicle};
    let frame = Duration::from_nanos(16_666_667);
    let dt = frame.as_secs_f64();
    for (file, phased) in
        [("nissan_350z.ron", false), ("sedan_8hp.ron", false), ("nissan_350z.ron", true), ("sedan_8hp.ron", true)]
    {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles").join(file);
        let mut core = Vehicle::load(&path).unwrap();
        let mut app = phases_app(phased);
        let root = spawn_vehicle(app.world_mut(), core.spec().clone(), Road::Body).unwrap();
        let automatic = core.tcu().is_some();
        let mut input = driveline::core::DriverInput { selector: Selector::Drive, ..Default::default() };
        let mut gears = Vec::new();
        for k in 0..600 {
            let t = k as f64 * dt;
            if automatic {
                input.throttle = if t < 0.5 { 0.0 } else { 1.0 };
            } else {
                // First, away, then second at 4 s and third at 7 s, the clutch down for each.
                input = driveline::core::vehicle::driver::first_to_third(t, 0.4);
            }
            core.step(&input, dt).unwrap();
            app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
            fixed_step(&mut app, frame);
            assert_eq!(app.world().resource::<FusedVehicleSteps>().is_fused(), !phased);
            let (ecs, c) = (app.world().get::<VehicleTelemetry>(root).unwrap().0, core.telemetry());
            assert_eq!(ecs.speed.to_bits(), c.speed.to_bits(), "{file} (phased: {phased}) at {t} s");
            assert_eq!(ecs.engine_rpm.to_bits(), c.engine_rpm.to_bits(), "{file} (phased: {phased}) at {t} s");
            if gears.last() != Some(&c.engaged_gear) {
                gears.push(c.engaged_gear);
            }
        }
        assert!(gears.contains(&3), "{file}: gears {gears:?}");
    }
}

#[test]
fn heat_ports_and_the_thermal_network_run_in_the_plugin_as_in_the_core() {
    let (scenario, mut sim) = load("EddyCurrentBrake");
    let mut app = create_app();
    let root = spawn_scenario(app.world_mut(), &scenario).unwrap();
    for _ in 0..200 {
        sim.step(1e-3).unwrap();
        fixed_step(&mut app, Duration::from_millis(1));
    }
    let parts = app.world().get::<DrivelineParts>(root).unwrap().parts().to_vec();
    let named = |n: &str| parts.iter().copied().find(|&e| app.world().get::<Name>(e).unwrap().as_str() == n).unwrap();
    let cap = app.world().get::<HeatPortState>(named("heatCapacitor")).expect("a heat port reading");
    assert_eq!(cap.temperature.to_bits(), sim.element_temperature(element(&sim, "heatCapacitor")).unwrap().to_bits());
    let brake = app.world().get::<HeatPortState>(named("eddyCurrentTorque")).expect("a heat port reading");
    assert_eq!(brake.temperature, cap.temperature);
    assert_eq!(brake.loss_power.to_bits(), sim.element_dissipation(element(&sim, "eddyCurrentTorque")).to_bits());
    assert!(cap.temperature > 450.0, "{cap:?}");
    // The inertia has no heat port: no reading.
    assert!(app.world().get::<HeatPortState>(named("inertia")).is_none());
}

/// The plugin sends each vehicle event of the core's once: over a launch of the 8HP sedan in
/// a fleet of 20 (the parallel path), each car's messages are the core `Vehicle`'s events in
/// order, and a tick of zero length (no step) sends nothing again.
#[test]
fn vehicle_messages_are_the_core_events_once() {
    use driveline::bevy::prelude::VehicleMessage;
    let (mut core, mut app, roots) = sedan_fleet(20, false);
    let mut input = held_in_drive();
    let (mut expected, mut got) = (Vec::new(), vec![Vec::new(); roots.len()]);
    for k in 0..3000 {
        if k == 500 {
            input.brake = 0.0;
            input.throttle = 1.0;
        }
        core.step(&input, 1e-3).unwrap();
        expected.extend(core.events().iter().copied());
        for &root in &roots {
            app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        }
        fixed_step(&mut app, Duration::from_millis(1));
        let had_events = !core.events().is_empty();
        if had_events {
            // A tick of zero length: no step, so no events.
            fixed_step(&mut app, Duration::ZERO);
        }
        for m in app.world_mut().resource_mut::<Messages<VehicleMessage>>().drain() {
            let car = roots.iter().position(|&r| r == m.vehicle).expect("a message of one of the cars");
            got[car].push(m.event);
        }
    }
    assert!(expected.len() >= 3, "the launch should raise events (start, shifts): {expected:?}");
    for events in &got {
        assert_eq!(events.len(), expected.len());
        assert!(events.iter().zip(&expected).all(|(a, b)| a.time.to_bits() == b.time.to_bits()));
    }
}

/// An app whose vehicles run their phases in their step (`phased` false: nothing else in the
/// schedule), or as systems in their sets (`phased`: a system of the user's in `Actuation`,
/// doing nothing).
fn phases_app(phased: bool) -> App {
    let mut app = create_app();
    if phased {
        app.add_systems(FixedUpdate, (|| {}).in_set(DrivelineSystems::Actuation));
    }
    app
}

/// A core 8HP sedan, and an app with `n` of them spawned (their phases as [`phases_app`]).
fn sedan_fleet(n: usize, phased: bool) -> (driveline::core::vehicle::Vehicle, App, Vec<Entity>) {
    use driveline::core::vehicle::{Road, Vehicle};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let core = Vehicle::load(&path).unwrap();
    let mut app = phases_app(phased);
    // Two compute threads (the process's pool, if a test made it first, is kept): the fleet's
    // paths of the plugin, its parts written in the vehicles' parallel step.
    let none = || bevy_app::TaskPoolThreadAssignmentPolicy {
        min_threads: 0,
        max_threads: 0,
        percent: 0.0,
        on_thread_spawn: None,
        on_thread_destroy: None,
    };
    let options = bevy_app::TaskPoolOptions {
        io: none(),
        async_compute: none(),
        ..bevy_app::TaskPoolOptions::with_num_threads(2)
    };
    app.add_plugins(bevy_app::TaskPoolPlugin { task_pool_options: options });
    let threads = bevy_tasks_threads();
    assert!(threads >= 2, "the fleet tests need two compute threads, the pool has {threads}");
    let roots = (0..n).map(|_| spawn_vehicle(app.world_mut(), core.spec().clone(), Road::Body).unwrap()).collect();
    (core, app, roots)
}

/// The compute task pool's threads.
fn bevy_tasks_threads() -> usize {
    bevy_tasks::ComputeTaskPool::get().thread_num()
}

/// A driver in Drive, holding the brake.
fn held_in_drive() -> driveline::core::DriverInput {
    use driveline::core::automatic::Selector;
    driveline::core::DriverInput { selector: Selector::Drive, brake: 1.0, ..Default::default() }
}

/// A fleet's write-back (from `PARALLEL_WRITE_BACK` drivelines on, the drivelines in
/// parallel): every part of every car holds its state as the core `Vehicle` driven alike
/// computes it, bit for bit, and a car marked `SkipWriteBack` keeps its parts' defaults.
#[test]
fn a_fleets_parts_hold_the_core_state_bit_for_bit() {
    for phased in [false, true] {
        fleets_parts_hold_the_core_state(phased);
    }
}

fn fleets_parts_hold_the_core_state(phased: bool) {
    let (mut core, mut app, roots) = sedan_fleet(20, phased);
    fleet_parts_hold_the_core_state(&mut app, &mut core, &roots);
    assert_eq!(app.world().resource::<FusedVehicleSteps>().is_fused(), !phased);
}

/// The write-back keeps each part table's columns from tick to tick until the table grows:
/// cars spawned after the first ticks (the part tables grown, their columns reallocated) have their
/// parts written, and so has the first car still, each as its core twin driven alike computes
/// them, bit for bit. One car first (the write-back on the calling thread), then 40 (the
/// vehicles' parallel step).
#[test]
fn parts_are_written_where_their_tables_moved_when_cars_were_spawned() {
    use driveline::core::vehicle::{Road, Vehicle};
    let (first_core, mut app, mut roots) = sedan_fleet(1, false);
    let mut cores = vec![first_core];
    let input = driveline::core::DriverInput { brake: 0.0, throttle: 0.6, ..held_in_drive() };
    for k in 0..400 {
        if k == 150 {
            for _ in 0..40 {
                let spec = cores[0].spec().clone();
                let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
                cores.push(Vehicle::load(&path).unwrap());
                roots.push(spawn_vehicle(app.world_mut(), spec, Road::Body).unwrap());
            }
        }
        for (core, &root) in cores.iter_mut().zip(&roots) {
            core.step(&input, 1e-3).unwrap();
            app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        }
        fixed_step(&mut app, Duration::from_millis(1));
    }
    let bits = |x: f64| x.to_bits();
    let world = app.world();
    for (core, &root) in cores.iter().zip(&roots) {
        let (sim, cache) = (core.simulation(), world.get::<driveline::bevy::DrivelineCache>(root).unwrap());
        assert!(core.telemetry().speed > 0.1, "every car is under way");
        for k in 0..sim.network().elements.len() {
            let part = cache.part(k).unwrap();
            if let Some((angle, speed)) = sim.body_state(k) {
                let b = world.get::<BodyState>(part).unwrap();
                assert_eq!((bits(b.angle), bits(b.speed)), (bits(angle), bits(speed)), "element {k}");
            } else if let Some((phi_rel, w_rel)) = sim.element_relative(k) {
                let c = world.get::<CouplingState>(part).unwrap();
                assert_eq!((bits(c.phi_rel), bits(c.w_rel)), (bits(phi_rel), bits(w_rel)), "element {k}");
                assert_eq!(bits(c.torque), bits(sim.element_torque(k)), "element {k}");
            }
        }
    }
}

/// A fleet's car whose parts are all marked `SkipWriteBack` is left out of the write-back
/// without a pass over its elements; a mark removed from one of its parts has that part written
/// from the next step (the other parts still left alone), all marks removed, every part, and
/// marked again, none.
#[test]
fn a_fleet_car_unmarked_part_by_part_is_written_again() {
    let (_, mut app, roots) = sedan_fleet(20, false);
    let (written, skipped) = (roots[0], roots[3]);
    skip_write_back(app.world_mut(), skipped);
    let drive = |app: &mut App, input: driveline::core::DriverInput, ticks: usize| {
        for _ in 0..ticks {
            for &root in &roots {
                app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
            }
            fixed_step(app, Duration::from_millis(1));
        }
    };
    let mut input = held_in_drive();
    drive(&mut app, input, 100);
    input.brake = 0.0;
    input.throttle = 1.0;
    drive(&mut app, input, 200);
    // The parts of element k of both cars (all the cars are driven alike: the same motion).
    let parts = |app: &App, k: usize| {
        let part = |root| app.world().get::<driveline::bevy::DrivelineCache>(root).unwrap().part(k).unwrap();
        (part(written), part(skipped))
    };
    let elements = app
        .world()
        .get::<driveline::bevy::DrivelineCache>(written)
        .unwrap()
        .simulation()
        .unwrap()
        .network()
        .elements
        .len();
    let bodies: Vec<usize> =
        (0..elements).filter(|&k| app.world().get::<BodyState>(parts(&app, k).0).is_some()).collect();
    let moving = |app: &App, k: usize| app.world().get::<BodyState>(parts(app, k).0).unwrap().speed != 0.0;
    let k = *bodies.iter().find(|&&k| moving(&app, k)).expect("a moving body");
    for &j in &bodies {
        assert_eq!(*app.world().get::<BodyState>(parts(&app, j).1).unwrap(), BodyState::default(), "element {j}");
    }
    let part = parts(&app, k).1;
    app.world_mut().entity_mut(part).remove::<SkipWriteBack>();
    drive(&mut app, input, 1);
    let state = |app: &App, part| *app.world().get::<BodyState>(part).unwrap();
    let (a, b) = parts(&app, k);
    assert_eq!(
        (state(&app, b).speed.to_bits(), state(&app, b).angle.to_bits()),
        (state(&app, a).speed.to_bits(), state(&app, a).angle.to_bits())
    );
    for &j in bodies.iter().filter(|&&j| j != k) {
        assert_eq!(state(&app, parts(&app, j).1), BodyState::default(), "element {j}");
    }
    for j in 0..elements {
        let part = parts(&app, j).1;
        app.world_mut().entity_mut(part).remove::<SkipWriteBack>();
    }
    drive(&mut app, input, 1);
    for &j in &bodies {
        let (a, b) = parts(&app, j);
        assert_eq!(state(&app, b).speed.to_bits(), state(&app, a).speed.to_bits(), "element {j}");
    }
    // Marked again while it runs: its parts keep what they last held, the other cars' move on.
    skip_write_back(app.world_mut(), skipped);
    let held = state(&app, parts(&app, k).1);
    drive(&mut app, input, 5);
    let (a, b) = parts(&app, k);
    assert_eq!(state(&app, b), held);
    assert_ne!(state(&app, a), held);
}

/// A state written on one car of a fleet (whose parts are written in the vehicles' parallel
/// step, straight into their columns) is where that car's next step starts, exactly as on a car
/// alone; the other cars do not see it.
#[test]
fn a_state_written_in_a_fleet_is_taken_as_on_a_car_alone() {
    use driveline::core::vehicle::Road;
    let (core, mut fleet, roots) = sedan_fleet(20, false);
    let mut alone = create_app();
    let single = spawn_vehicle(alone.world_mut(), core.spec().clone(), Road::Body).unwrap();
    let mut input = held_in_drive();
    let wheel_of = |app: &App, root: Entity| app.world().get::<VehicleParts>(root).unwrap().wheels[2];
    for k in 0..600 {
        if k == 100 {
            input.brake = 0.0;
            input.throttle = 0.5;
        }
        if k == 400 {
            // The rear left wheel spun up by 5 rad/s, written as a user would.
            for (app, root) in [(&mut fleet, roots[5]), (&mut alone, single)] {
                let wheel = wheel_of(app, root);
                app.world_mut().get_mut::<BodyState>(wheel).unwrap().speed += 5.0;
            }
        }
        for (app, list) in [(&mut fleet, &roots[..]), (&mut alone, &[single][..])] {
            for &root in list {
                app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
            }
            fixed_step(app, Duration::from_millis(1));
        }
    }
    let tele = |app: &App, root: Entity| app.world().get::<VehicleTelemetry>(root).unwrap().0;
    let (written, other, reference) = (tele(&fleet, roots[5]), tele(&fleet, roots[4]), tele(&alone, single));
    assert_eq!(written.speed.to_bits(), reference.speed.to_bits());
    assert_eq!(written.engine_rpm.to_bits(), reference.engine_rpm.to_bits());
    let w = |app: &App, root| app.world().get::<BodyState>(wheel_of(app, root)).unwrap().speed;
    assert_eq!(w(&fleet, roots[5]).to_bits(), w(&alone, single).to_bits());
    assert_ne!(written.speed.to_bits(), other.speed.to_bits(), "the other cars did not take the write");
}

/// A part renamed on one car of a fleet rebuilds that car's network, warm, and no other. The vehicle's controllers
/// find their wheel by its name: they refuse to start on the renamed network (a message, no
/// panic) and the car waits; named back, it drives on.
#[test]
fn a_part_renamed_in_a_fleet_rebuilds_that_car_alone() {
    let (_, mut app, roots) = sedan_fleet(20, false);
    let mut input = held_in_drive();
    input.brake = 0.0;
    input.throttle = 0.5;
    let tick = |app: &mut App| {
        for &root in &roots {
            app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        }
        fixed_step(app, Duration::from_millis(1));
    };
    for _ in 0..300 {
        tick(&mut app);
    }
    app.world_mut().resource_mut::<Messages<DrivelineRebuilt>>().clear();
    app.world_mut().resource_mut::<Messages<DrivelineEditRefused>>().clear();
    let wheel = app.world().get::<VehicleParts>(roots[9]).unwrap().wheels[0];
    app.world_mut().get_mut::<Name>(wheel).unwrap().set("front_left_wheel");
    tick(&mut app);
    let rebuilt: Vec<_> = app.world_mut().resource_mut::<Messages<DrivelineRebuilt>>().drain().collect();
    assert_eq!(rebuilt.len(), 1, "{rebuilt:?}");
    assert_eq!(rebuilt[0].driveline, roots[9]);
    assert!(rebuilt[0].warm, "{rebuilt:?}");
    let refused: Vec<_> = app.world_mut().resource_mut::<Messages<DrivelineEditRefused>>().drain().collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].driveline, Some(roots[9]));
    assert!(refused[0].message.contains("'wheel_fl'"), "{}", refused[0].message);
    let speed = |app: &App, root| app.world().get::<VehicleTelemetry>(root).unwrap().0.speed;
    let (held, other) = (speed(&app, roots[9]), speed(&app, roots[8]));
    for _ in 0..20 {
        tick(&mut app);
    }
    assert_eq!(speed(&app, roots[9]).to_bits(), held.to_bits(), "the car waits");
    assert!(speed(&app, roots[8]) > other, "the others drive on");
    assert!(app.world_mut().resource_mut::<Messages<DrivelineEditRefused>>().drain().next().is_none(), "said once");
    app.world_mut().get_mut::<Name>(wheel).unwrap().set("wheel_fl");
    // (Its controllers start over after the rebuild: the TCU engages Drive again first.)
    for _ in 0..1500 {
        tick(&mut app);
    }
    assert!(speed(&app, roots[9]) > held + 1.0, "named back, it drives on: {held} -> {}", speed(&app, roots[9]));
}

/// Parts joined anew (their `Connections` edited) rebuild their driveline warm: two motors
/// swapped between two flywheels drive them as swapped from then on, each flywheel starting from
/// the speed it had. (The sync notices the edit by the parts' change ticks, `Changed<Connections>`;
/// a tick with no such edit anywhere skips the parts' scan.)
#[test]
fn parts_joined_anew_rebuild_their_driveline_warm() {
    let mut app = create_app();
    let (root, first) = flywheel(&mut app, 2.0);
    let part = Inertia { j: 4.0, phi_start: Some(0.0), w_start: Some(0.0) };
    let second = app.world_mut().spawn((Name::new("J2"), part, PartOf(root))).id();
    let strong = motor(&mut app, root, first, 4.0);
    let idle = named_motor(&mut app, root, second, 0.0, "idle");
    // 4 N m on 2 kg m^2: 2 rad/s^2 for 1 s.
    for _ in 0..100 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    let speed = |app: &App, e| app.world().get::<BodyState>(e).unwrap().speed;
    let (w1, w2) = (speed(&app, first), speed(&app, second));
    assert!((w1 - 2.0).abs() < 1e-12 && w2 == 0.0, "w1 = {w1}, w2 = {w2}");
    app.world_mut().resource_mut::<Messages<DrivelineRebuilt>>().clear();
    *app.world_mut().get_mut::<Connections>(strong).unwrap() = Connections::new().with("flange", second, "flange_a");
    *app.world_mut().get_mut::<Connections>(idle).unwrap() = Connections::new().with("flange", first, "flange_a");
    for _ in 0..100 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    let rebuilt: Vec<_> = app.world_mut().resource_mut::<Messages<DrivelineRebuilt>>().drain().collect();
    assert!(rebuilt.len() == 1 && rebuilt[0].driveline == root && rebuilt[0].warm, "{rebuilt:?}");
    // (Exact to rounding: constant accelerations, which the order-4 method integrates exactly.)
    let (w1, w2) = (speed(&app, first), speed(&app, second));
    assert!((w1 - 2.0).abs() < 1e-12, "the first coasts: w1 = {w1}");
    // 4 N m on 4 kg m^2: 1 rad/s^2 for 1 s.
    assert!((w2 - 1.0).abs() < 1e-12, "the second is driven: w2 = {w2}");
}

/// UDDS, the shipped urban cycle.
fn udds() -> std::sync::Arc<driveline::core::vehicle::driver::Cycle> {
    use driveline::core::vehicle::driver::Cycle;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cycles/udds.csv");
    std::sync::Arc::new(Cycle::parse(&std::fs::read_to_string(path).unwrap(), "udds").unwrap())
}

/// A `CycleDriver` on each car of a fleet (the parallel pass, the parts written in the step)
/// drives it as the core's `Driver` drives a core `Vehicle`: each car at its own place on UDDS
/// (stopped, launching, cruising, braking), the same inputs on the root and the same telemetry
/// bit for bit, whether the phases run in the step or as systems (where the driver runs in
/// `Control`).
#[test]
fn cycle_drivers_drive_a_fleet_as_the_core_driver_drives_a_vehicle() {
    use driveline::core::vehicle::Vehicle;
    use driveline::core::vehicle::driver::{Driver, DriverParams};
    let cycle = udds();
    for phased in [false, true] {
        let (core, mut app, roots) = sedan_fleet(17, phased);
        let offsets: Vec<f64> = (0..roots.len()).map(|i| (i as f64 * 37.0 + 15.0) % cycle.duration()).collect();
        let mut cores: Vec<(Vehicle, Driver)> = Vec::new();
        for (&root, &offset) in roots.iter().zip(&offsets) {
            let driver = CycleDriver::new(core.spec(), cycle.clone()).starting_at(offset, true);
            app.world_mut().entity_mut(root).insert(driver);
            cores.push((Vehicle::new(core.spec().clone()).unwrap(), Driver::new(core.spec(), DriverParams::default())));
        }
        let dt = 1e-3;
        for _ in 0..1500 {
            fixed_step(&mut app, Duration::from_millis(1));
            for ((v, d), &offset) in cores.iter_mut().zip(&offsets) {
                let t = v.telemetry();
                let input = d.input_at(&cycle, (t.time + offset) % cycle.duration(), t, dt);
                v.step(&input, dt).unwrap();
            }
        }
        let (mut moving, mut launching) = (0, 0);
        for ((v, _), &root) in cores.iter().zip(&roots) {
            let (tele, input) = (&app.world().get::<VehicleTelemetry>(root).unwrap().0, v.telemetry());
            assert_eq!(tele.time.to_bits(), input.time.to_bits());
            assert_eq!(format!("{tele:?}"), format!("{input:?}"), "phased {phased}: car {root:?}'s telemetry");
            let written = app.world().get::<VehicleInput>(root).unwrap().0;
            moving += usize::from(tele.speed > 1.0);
            launching += usize::from(written.throttle > 0.0 && tele.speed < 5.0);
        }
        // The test means something only if the drivers did drive.
        assert!(moving >= 5 && launching >= 1, "phased {phased}: {moving} cars moving, {launching} launching");
        assert!(app.world_mut().resource_mut::<Messages<DrivelineStepFailed>>().drain().next().is_none());
    }
}

/// A `CycleDriver` whose offset is not finite is refused, with a message naming the field, and
/// the car keeps the input it has; fixed, it drives again. Nothing panics.
#[test]
fn a_cycle_driver_with_a_bad_offset_is_refused_and_the_input_kept() {
    let mut app = create_app();
    let spec = vehicle_spec("sedan_8hp.ron");
    let root = spawn_vehicle(app.world_mut(), spec.clone(), driveline::core::vehicle::Road::Body).unwrap();
    let mut driver = CycleDriver::new(&spec, udds()).starting_at(30.0, false);
    driver.offset = f64::NAN;
    app.world_mut().entity_mut(root).insert(driver);
    let kept = held_in_drive();
    app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = kept;
    for _ in 0..5 {
        fixed_step(&mut app, Duration::from_millis(1));
    }
    let refused: Vec<_> = app.world_mut().resource_mut::<Messages<DrivelineEditRefused>>().drain().collect();
    assert!(!refused.is_empty() && refused.iter().all(|r| r.message.contains("CycleDriver.offset")), "{refused:?}");
    assert_eq!(app.world().get::<VehicleInput>(root).unwrap().0, kept);
    app.world_mut().get_mut::<CycleDriver>(root).unwrap().offset = 30.0;
    fixed_step(&mut app, Duration::from_millis(1));
    assert!(app.world_mut().resource_mut::<Messages<DrivelineEditRefused>>().drain().next().is_none());
    // 30 s into UDDS the trace asks for speed: the driver lets the brake off.
    assert_eq!(app.world().get::<VehicleInput>(root).unwrap().0.brake, 0.0);
}

/// The write-back writes a part's state only where it moved, so that `Changed<BodyState>`
/// and `Changed<CouplingState>` see the moving parts and not the resting ones: one driveline
/// (its parts written in element order on the calling thread) and twenty (a fleet's path),
/// each a flywheel under 2 N m beside one under no torque, their torque sources constant.
#[test]
fn the_write_back_marks_only_the_parts_that_moved() {
    use bevy_ecs::prelude::{Changed, Query, ResMut, Resource};
    #[derive(Resource, Default)]
    struct Seen(Vec<Entity>);
    for drivelines in [1, 20] {
        let mut app = create_app();
        app.init_resource::<Seen>();
        app.add_systems(
            FixedUpdate,
            (|bodies: Query<Entity, Changed<BodyState>>,
              couplings: Query<Entity, Changed<CouplingState>>,
              mut seen: ResMut<Seen>| {
                seen.0.clear();
                seen.0.extend(bodies.iter().chain(couplings.iter()));
            })
            .in_set(DrivelineSystems::Integrate),
        );
        let mut moving = Vec::new();
        let mut resting = Vec::new();
        for _ in 0..drivelines {
            let (root, turning) = flywheel(&mut app, 0.5);
            let pushing = motor(&mut app, root, turning, 2.0);
            let part = Inertia { j: 0.5, phi_start: Some(0.0), w_start: Some(0.0) };
            let still = app.world_mut().spawn((Name::new("K"), part, PartOf(root))).id();
            let idle = named_motor(&mut app, root, still, 0.0, "idle motor");
            moving.push(turning);
            // (A torque source has no relative coordinate: its state is its torque, written at
            // the first tick and the same since.)
            resting.extend([still, idle, pushing]);
        }
        for _ in 0..3 {
            fixed_step(&mut app, Duration::from_millis(1));
        }
        let seen = &app.world().resource::<Seen>().0;
        for part in &moving {
            assert!(seen.contains(part), "{drivelines} drivelines: a moving part not marked changed");
        }
        for part in &resting {
            assert!(!seen.contains(part), "{drivelines} drivelines: a resting part marked changed");
        }
        let w = app.world().get::<BodyState>(moving[0]).unwrap().speed;
        assert!((w - 0.012).abs() < 1e-14, "{w}");
    }
}

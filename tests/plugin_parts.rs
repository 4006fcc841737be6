//! Parts as ECS data: typed, reflectable components that users read and write. Parameter edits
//! apply in place with the motion, the clock and the controllers kept; bad values are refused
//! with the last valid one kept; written states are where the next step starts; spawning fails
//! with typed errors; a vehicle's entities save and load as a dynamic world.

mod common;
use bevy_app::{App, FixedUpdate, Update};
use bevy_ecs::message::Messages;
use bevy_ecs::name::Name;
use bevy_ecs::prelude::*;
use bevy_ecs::schedule::SingleThreadedExecutor;
use common::*;
use driveline::bevy::prelude::*;
use driveline::bevy::{DrivelineCache, parts};
use driveline::core::vehicle::{Road, Vehicle};
use driveline::core::{DriverInput, FrictionMode, Signal};
use std::path::Path;
use std::time::Duration;

fn drain<M: bevy_ecs::message::Message>(app: &mut App) -> Vec<M> {
    app.world_mut().resource_mut::<Messages<M>>().drain().collect()
}

/// A flywheel of `j` kg m^2 at rest driven by a constant `tau` N m.
fn flywheel(app: &mut App, j: f64, tau: f64) -> (Entity, Entity) {
    let world = app.world_mut();
    let root = world.spawn(Driveline::default()).id();
    let wheel =
        world.spawn((Name::new("J"), Inertia { j, phi_start: Some(0.0), w_start: Some(0.0) }, PartOf(root))).id();
    world.spawn((
        Name::new("motor"),
        ConstantTorque { tau_constant: tau, use_support: false },
        PartOf(root),
        Connections::new().with("flange", wheel, "flange_a"),
    ));
    (root, wheel)
}

#[test]
fn editing_an_inertia_applies_in_place_with_the_motion_and_the_clock_kept() {
    // 2 N m on 0.5 kg m^2 for 1 s (w = 4 rad/s), then J = 2: 1 rad/s^2, w = 5 rad/s at 2 s.
    // Constant torque: the Gauss steps are exact, the tolerance is rounding.
    let mut app = create_app();
    let (root, wheel) = flywheel(&mut app, 0.5, 2.0);
    for _ in 0..100 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    let generation = app.world().get::<DrivelineCache>(root).unwrap().generation();
    assert!((app.world().get::<BodyState>(wheel).unwrap().speed - 4.0).abs() < 1e-12);
    app.world_mut().get_mut::<Inertia>(wheel).unwrap().j = 2.0;
    for _ in 0..100 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    let w = app.world().get::<BodyState>(wheel).unwrap().speed;
    assert!((w - 5.0).abs() < 1e-12, "{w}");
    let cache = app.world().get::<DrivelineCache>(root).unwrap();
    assert!((cache.simulation().unwrap().time() - 2.0).abs() < 1e-12, "the clock ran on");
    assert_eq!(cache.generation(), generation, "no rebuild for a parameter edit");
    assert!(drain::<DrivelineRebuilt>(&mut app).is_empty());
    // A mutable access that changes nothing (an inspector's every frame) changes nothing.
    let before = *app.world().get::<BodyState>(wheel).unwrap();
    let _ = &mut *app.world_mut().get_mut::<Inertia>(wheel).unwrap();
    fixed_step(&mut app, Duration::from_millis(10));
    let after = app.world().get::<BodyState>(wheel).unwrap().speed;
    assert!((after - before.speed - 0.01).abs() < 1e-12);
}

#[test]
fn a_bad_value_is_refused_naming_the_part_and_field_and_the_last_valid_value_is_kept() {
    let mut app = create_app();
    let (root, wheel) = flywheel(&mut app, 0.5, 2.0);
    fixed_step(&mut app, Duration::from_millis(10));
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        app.world_mut().get_mut::<Inertia>(wheel).unwrap().j = bad;
        fixed_step(&mut app, Duration::from_millis(10));
        let refused = drain::<DrivelineEditRefused>(&mut app);
        assert_eq!(refused.len(), 1, "{bad}: {refused:?}");
        let m = &refused[0];
        assert_eq!((m.part, m.driveline), (wheel, Some(root)));
        assert!(m.message.contains("'J'") && m.message.contains("`j`"), "{}", m.message);
        assert_eq!(app.world().get::<Inertia>(wheel).unwrap().j, 0.5, "the last valid value is back");
    }
    // The flywheel ran on at 4 rad/s^2 through it all: 4 steps of 10 ms.
    let w = app.world().get::<BodyState>(wheel).unwrap().speed;
    assert!((w - 0.16).abs() < 1e-12, "{w}");
    // A clutch's normal force below zero is refused too.
    let clutch =
        app.world_mut().spawn((Name::new("c"), Clutch { fn_max: -5.0, ..Default::default() }, PartOf(root))).id();
    fixed_step(&mut app, Duration::from_millis(10));
    let refused = drain::<DrivelineEditRefused>(&mut app);
    assert!(refused.iter().any(|m| m.part == clutch && m.message.contains("fn_max")), "{refused:?}");
}

#[test]
fn a_written_speed_is_where_the_next_step_starts() {
    // Written 10 rad/s at t = 0.5 s: 10 + 4 * 0.1 after ten more 10 ms steps.
    let mut app = create_app();
    let (_, wheel) = flywheel(&mut app, 0.5, 2.0);
    for _ in 0..50 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    app.world_mut().get_mut::<BodyState>(wheel).unwrap().speed = 10.0;
    for _ in 0..10 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    let w = app.world().get::<BodyState>(wheel).unwrap().speed;
    assert!((w - 10.4).abs() < 1e-12, "{w}");
    assert!(drain::<StateWriteAdjusted>(&mut app).is_empty());
    // A NaN speed is refused and the motion goes on.
    app.world_mut().get_mut::<BodyState>(wheel).unwrap().speed = f64::NAN;
    fixed_step(&mut app, Duration::from_millis(10));
    assert_eq!(drain::<DrivelineEditRefused>(&mut app).len(), 1);
    let w = app.world().get::<BodyState>(wheel).unwrap().speed;
    assert!((w - 10.44).abs() < 1e-12, "{w}");
}

#[test]
fn a_written_engagement_drives_a_clutch_whose_force_is_an_input() {
    // Two flywheels, the first at 10 rad/s, joined by a clutch whose normal force is a run-time
    // input at 0: they keep their speeds until ClutchEngagement is written, then lock.
    let mut app = create_app();
    let world = app.world_mut();
    let root = world.spawn(Driveline::default()).id();
    let a =
        world.spawn((Name::new("a"), Inertia { j: 1.0, phi_start: Some(0.0), w_start: Some(10.0) }, PartOf(root))).id();
    let b =
        world.spawn((Name::new("b"), Inertia { j: 1.0, phi_start: Some(0.0), w_start: Some(0.0) }, PartOf(root))).id();
    let input = Signal::Input { name: "press".into(), value: 0.0, rate: 0.0, since: 0.0 };
    let clutch = world
        .spawn((
            Name::new("clutch"),
            Clutch { fn_max: 100.0, f_normalized: SignalParam(input), ..Default::default() },
            PartOf(root),
            Connections::new().with("flange_a", a, "flange_b").with("flange_b", b, "flange_a"),
        ))
        .id();
    for _ in 0..10 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    assert_eq!(app.world().get::<BodyState>(b).unwrap().speed, 0.0);
    assert_eq!(app.world().get::<ClutchEngagement>(clutch).unwrap().0, 0.0);
    app.world_mut().get_mut::<ClutchEngagement>(clutch).unwrap().0 = 1.0;
    for _ in 0..100 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    // 50 N m of kinetic friction (mu 0.5 x 100 N x 1 m) brings both to 5 rad/s in 0.1 s.
    let (wa, wb) = (app.world().get::<BodyState>(a).unwrap().speed, app.world().get::<BodyState>(b).unwrap().speed);
    assert!((wa - 5.0).abs() < 1e-9 && (wb - 5.0).abs() < 1e-9, "{wa} {wb}");
    assert_eq!(app.world().get::<CouplingState>(clutch).unwrap().mode, Some(FrictionMode::Stuck));
    assert_eq!(app.world().get::<ClutchEngagement>(clutch).unwrap().0, 1.0);
    app.world_mut().get_mut::<ClutchEngagement>(clutch).unwrap().0 = f64::NAN;
    fixed_step(&mut app, Duration::from_millis(10));
    assert_eq!(drain::<DrivelineEditRefused>(&mut app).len(), 1);
    assert_eq!(app.world().get::<ClutchEngagement>(clutch).unwrap().0, 1.0, "the last valid value is kept");
}

/// The 350Z pulling away in first at 60 Hz, then at full throttle with the clutch locked.
fn pulling_350z(app: &mut App) -> Entity {
    let root = spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap();
    let frame = Duration::from_nanos(16_666_667);
    let mut input = DriverInput { clutch: 1.0, gear: 1, ..Default::default() };
    for k in 0..360 {
        let t = k as f64 / 60.0;
        input.clutch = if t < 1.5 { 1.0 } else { (1.0 - (t - 1.5) / 3.0).max(0.0) };
        input.throttle = if t < 1.5 {
            0.0
        } else if t < 5.0 {
            0.25
        } else {
            1.0
        };
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        fixed_step(app, frame);
    }
    root
}

#[test]
fn a_weaker_clutch_on_a_moving_car_slips_at_once_and_nothing_else_restarts() {
    let mut app = create_app();
    let root = pulling_350z(&mut app);
    let frame = Duration::from_nanos(16_666_667);
    let clutch = app.world().get::<VehicleParts>(root).unwrap().clutch.expect("a manual has a clutch");
    assert_eq!(app.world().get::<CouplingState>(clutch).unwrap().mode, Some(FrictionMode::Stuck));
    let before = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert!(before.running && before.speed > 3.0 && before.engaged_gear == 1, "{before:?}");
    let generation = app.world().get::<DrivelineCache>(root).unwrap().generation();
    app.world_mut().get_mut::<Clutch>(clutch).unwrap().fn_max *= 0.05;
    fixed_step(&mut app, frame);
    fixed_step(&mut app, frame);
    let after = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert_ne!(app.world().get::<CouplingState>(clutch).unwrap().mode, Some(FrictionMode::Stuck));
    assert!(after.clutch_slip.abs() > 1.0, "slip {}", after.clutch_slip);
    // Time, speed, gear and engine run on: no rebuild, no restart.
    assert!((after.time - before.time - 2.0 / 60.0).abs() < 1e-9);
    assert!((after.speed - before.speed).abs() < 0.5, "{} vs {}", after.speed, before.speed);
    assert_eq!(after.engaged_gear, 1);
    assert!(after.running);
    assert_eq!(app.world().get::<DrivelineCache>(root).unwrap().generation(), generation);
    assert!(drain::<DrivelineRebuilt>(&mut app).is_empty());
}

#[test]
fn a_vehicle_is_set_to_a_road_speed_consistently() {
    let mut app = create_app();
    let root = pulling_350z(&mut app);
    let v0 = app.world().get::<VehicleTelemetry>(root).unwrap().0.speed;
    let report = set_road_speed(app.world_mut(), root, 2.0 * v0).unwrap();
    assert!(report.is_empty(), "{report:?}");
    let parts = app.world().get::<VehicleParts>(root).unwrap().clone();
    let body = app.world().get::<BodyState>(parts.body.unwrap()).unwrap().speed;
    assert!((body - 2.0 * v0).abs() < 1e-12 * v0);
    let r = vehicle_spec("nissan_350z.ron").wheels.radius;
    for w in &parts.wheels {
        assert!((app.world().get::<BodyState>(*w).unwrap().speed * r - 2.0 * v0).abs() < 1e-9);
    }
    fixed_step(&mut app, Duration::from_nanos(16_666_667));
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert!((t.speed - 2.0 * v0).abs() < 0.2, "{} vs {}", t.speed, 2.0 * v0);
    assert!(drain::<StateWriteAdjusted>(&mut app).is_empty());
    assert!(set_road_speed(app.world_mut(), root, f64::NAN).is_err());
}

#[test]
fn a_structural_change_rebuilds_warm_and_says_so() {
    let mut app = create_app();
    let (root, wheel) = flywheel(&mut app, 2.0, 4.0);
    fixed_step(&mut app, Duration::from_millis(10));
    assert!(drain::<DrivelineRebuilt>(&mut app).is_empty(), "the first build is not a rebuild");
    let world = app.world_mut();
    let j2 =
        world.spawn((Name::new("J2"), Inertia { j: 2.0, phi_start: Some(0.0), w_start: Some(0.0) }, PartOf(root))).id();
    world.spawn((
        Name::new("coupling"),
        Damper { d: 1.0, ..Default::default() },
        PartOf(root),
        Connections::new().with("flange_a", wheel, "flange_b").with("flange_b", j2, "flange_a"),
    ));
    fixed_step(&mut app, Duration::from_millis(10));
    let rebuilt = drain::<DrivelineRebuilt>(&mut app);
    assert_eq!(rebuilt.len(), 1, "{rebuilt:?}");
    assert!(rebuilt[0].warm && rebuilt[0].driveline == root);
}

#[test]
fn spawning_fails_with_typed_errors_and_leaves_nothing_behind() {
    let mut app = create_app();
    let mut spec = vehicle_spec("nissan_350z.ron");
    spec.body.mass = -1.0;
    let before = app.world().entities().count_spawned();
    let err = spawn_vehicle(app.world_mut(), spec.clone(), Road::Body).unwrap_err();
    let dyn_err: &dyn std::error::Error = &err;
    assert!(dyn_err.to_string().contains("mass"), "{dyn_err}");
    assert!(matches!(err, SpawnError::Vehicle(_)));
    assert_eq!(app.world().entities().count_spawned(), before);
    let (mut scenario, _) = load("CoupledClutches");
    scenario.connections.push(("J1.nowhere".into(), "J2.flange_a".into()));
    let err = spawn_scenario(app.world_mut(), &scenario).unwrap_err();
    assert!(matches!(err, SpawnError::Network(_)) && err.to_string().contains("nowhere"), "{err}");
    assert_eq!(app.world().entities().count_spawned(), before);

    // The Commands form: a good vehicle spawns, a bad one is reported for its reserved root.
    #[derive(Resource)]
    struct Specs(driveline::core::VehicleSpec, driveline::core::VehicleSpec);
    app.insert_resource(Specs(vehicle_spec("nissan_350z.ron"), spec));
    app.add_systems(Update, |mut commands: Commands, specs: Res<Specs>, mut done: Local<bool>| {
        if !*done {
            commands.spawn_vehicle(specs.0.clone(), Road::Body);
            commands.spawn_vehicle(specs.1.clone(), Road::Body);
            *done = true;
        }
    });
    app.update();
    let mut q = app.world_mut().query::<&VehicleParts>();
    assert_eq!(q.iter(app.world()).count(), 1);
    let failed = drain::<DrivelineBuildFailed>(&mut app);
    assert!(failed.len() == 1 && failed[0].message.contains("mass"), "{failed:?}");
}

#[test]
fn a_single_threaded_fixed_schedule_without_task_pool_plugin_runs() {
    let mut app = create_app();
    app.edit_schedule(FixedUpdate, |s| {
        s.set_executor(SingleThreadedExecutor::new());
    });
    let (_, wheel) = flywheel(&mut app, 0.5, 2.0);
    fixed_step(&mut app, Duration::from_millis(10));
    assert!((app.world().get::<BodyState>(wheel).unwrap().speed - 0.04).abs() < 1e-12);
}

#[test]
fn every_public_component_is_registered_for_reflection() {
    use bevy_ecs::reflect::{AppTypeRegistry, ReflectComponent};
    use std::any::TypeId;
    let app = create_app();
    let registry = app.world().resource::<AppTypeRegistry>().read();
    let components = [
        TypeId::of::<Driveline>(),
        TypeId::of::<PartOf>(),
        TypeId::of::<DrivelineParts>(),
        TypeId::of::<Connections>(),
        TypeId::of::<BodyState>(),
        TypeId::of::<CouplingState>(),
        TypeId::of::<ClutchEngagement>(),
        TypeId::of::<SkipWriteBack>(),
        TypeId::of::<DrivelineInputs>(),
        TypeId::of::<VehicleDefinition>(),
        TypeId::of::<VehicleController>(),
        TypeId::of::<VehicleParts>(),
        TypeId::of::<VehicleInput>(),
        TypeId::of::<VehicleTelemetry>(),
        TypeId::of::<EngineController>(),
        TypeId::of::<TransmissionController>(),
        TypeId::of::<CycleDriver>(),
        TypeId::of::<Inertia>(),
        TypeId::of::<parts::Fixed>(),
        TypeId::of::<TorqueSource>(),
        TypeId::of::<parts::SpeedSource>(),
        TypeId::of::<parts::PositionSource>(),
        TypeId::of::<parts::LinearSpeedDependentTorque>(),
        TypeId::of::<parts::InverseSpeedDependentTorque>(),
        TypeId::of::<parts::SignTorque>(),
        TypeId::of::<parts::Torque2>(),
        TypeId::of::<parts::ConstantSpeed>(),
        TypeId::of::<parts::MoveSource>(),
        TypeId::of::<parts::Disc>(),
        TypeId::of::<parts::Gearbox>(),
        TypeId::of::<parts::Accelerate>(),
        TypeId::of::<parts::AccSensor>(),
        TypeId::of::<parts::RelAccSensor>(),
        TypeId::of::<parts::ElastoBacklash2>(),
        TypeId::of::<parts::RelativeStates>(),
        TypeId::of::<parts::InitializeFlange>(),
        TypeId::of::<parts::EddyCurrentTorque>(),
        TypeId::of::<parts::HeatCapacitor>(),
        TypeId::of::<parts::ThermalConductor>(),
        TypeId::of::<parts::Convection>(),
        TypeId::of::<parts::FixedTemperature>(),
        TypeId::of::<parts::FixedHeatFlow>(),
        TypeId::of::<parts::IdealGearR2T>(),
        TypeId::of::<parts::AngleSensor>(),
        TypeId::of::<parts::SpeedSensor>(),
        TypeId::of::<parts::RelAngleSensor>(),
        TypeId::of::<parts::RelSpeedSensor>(),
        TypeId::of::<parts::TorqueSensor>(),
        TypeId::of::<parts::PowerSensor>(),
        TypeId::of::<parts::MultiSensor>(),
        TypeId::of::<parts::KinematicClutch>(),
        TypeId::of::<ConstantTorque>(),
        TypeId::of::<parts::TorqueStep>(),
        TypeId::of::<parts::QuadraticSpeedDependentTorque>(),
        TypeId::of::<IdealGear>(),
        TypeId::of::<LossyGear>(),
        TypeId::of::<IdealPlanetary>(),
        TypeId::of::<Spring>(),
        TypeId::of::<Damper>(),
        TypeId::of::<SpringDamper>(),
        TypeId::of::<ElastoBacklash>(),
        TypeId::of::<Clutch>(),
        TypeId::of::<ElasticClutch>(),
        TypeId::of::<parts::BearingFriction>(),
        TypeId::of::<parts::Mass>(),
        TypeId::of::<parts::IdealRollingWheel>(),
        TypeId::of::<parts::QuadraticSpeedDependentForce>(),
        TypeId::of::<parts::ForceSource>(),
        TypeId::of::<parts::LinearSpeedSource>(),
        TypeId::of::<Engine>(),
        TypeId::of::<TorqueConverter>(),
        TypeId::of::<DogClutch>(),
        TypeId::of::<LimitedSlip>(),
        TypeId::of::<Tyre>(),
    ];
    for id in components {
        let reg = registry.get(id).unwrap_or_else(|| panic!("{id:?} is not registered"));
        assert!(reg.data::<ReflectComponent>().is_some(), "{} lacks ReflectComponent", reg.type_info().type_path());
    }
}

/// Asset handles do not occur in a driveline; the deserializer asks for none.
struct NoAssets;
impl bevy_asset::LoadFromPath for NoAssets {
    fn load_from_path_erased(
        &mut self,
        _: std::any::TypeId,
        path: bevy_asset::AssetPath<'static>,
    ) -> bevy_asset::UntypedHandle {
        unreachable!("a driveline scene holds no asset handle, asked for {path}")
    }
}

#[test]
fn a_saved_vehicle_loads_into_another_world_and_drives_like_the_original() {
    use bevy_ecs::entity::EntityHashMap;
    use bevy_ecs::reflect::AppTypeRegistry;
    use bevy_world_serialization::DynamicWorldBuilder;
    use bevy_world_serialization::serde::WorldDeserializer;
    use serde::de::DeserializeSeed;

    for file in ["nissan_350z.ron", "sedan_8hp.ron"] {
        let mut app = create_app();
        let root = spawn_vehicle(app.world_mut(), vehicle_spec(file), Road::Body).unwrap();
        fixed_step(&mut app, Duration::from_millis(1));
        // Save the root and its parts: every registered component (the controllers save as
        // nothing and are rebuilt from the definition).
        let text = {
            let registry = app.world().resource::<AppTypeRegistry>().clone();
            let registry = registry.read();
            let mut entities = vec![root];
            entities.extend_from_slice(app.world().get::<DrivelineParts>(root).unwrap().parts());
            let saved =
                DynamicWorldBuilder::from_world(app.world(), &registry).extract_entities(entities.into_iter()).build();
            saved.serialize(&registry).unwrap_or_else(|e| panic!("{e}"))
        };
        // Load it into a fresh app and drive both the same way for 3 s at 60 Hz.
        let mut loaded = create_app();
        let world = {
            let registry = loaded.world().resource::<AppTypeRegistry>().clone();
            let registry = registry.read();
            let mut de = ron::Deserializer::from_str(&text).unwrap();
            WorldDeserializer { type_registry: &registry, load_from_path: &mut NoAssets }
                .deserialize(&mut de)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let mut map = EntityHashMap::default();
        world.write_to_world(loaded.world_mut(), &mut map).unwrap();
        let root2 = map[&root];
        // The root's references are mapped to the loaded parts.
        let parts2 = loaded.world().get::<VehicleParts>(root2).unwrap();
        assert_eq!(loaded.world().get::<Name>(parts2.engine).map(|n| n.as_str()), Some("engine"));
        assert!(loaded.world().get::<PartOf>(parts2.engine).is_some_and(|p| p.0 == root2));
        // A fresh original to compare with, from the same description.
        let mut fresh = create_app();
        let root3 = spawn_vehicle(fresh.world_mut(), vehicle_spec(file), Road::Body).unwrap();
        fixed_step(&mut fresh, Duration::from_millis(1));
        let frame = Duration::from_nanos(16_666_667);
        // The loaded vehicle is built from its parts' start values (at rest, at t = 0: state
        // is not saved, see issue 31's snapshots); the fresh one started there 1 ms earlier.
        let input = DriverInput {
            clutch: 1.0,
            gear: 1,
            selector: driveline::core::automatic::Selector::Drive,
            ..Default::default()
        };
        for (a, r) in [(&mut loaded, root2), (&mut fresh, root3)] {
            a.world_mut().get_mut::<VehicleInput>(r).unwrap().0 = input;
        }
        for _ in 0..180 {
            fixed_step(&mut loaded, frame);
            fixed_step(&mut fresh, frame);
        }
        let a = loaded.world().get::<VehicleTelemetry>(root2).unwrap().0;
        let b = fresh.world().get::<VehicleTelemetry>(root3).unwrap().0;
        assert!(a.running && a.engine_rpm > 500.0, "{file}: {a:?}");
        // Both idle the same way, to well within a percent (1 ms apart).
        assert!(
            (a.engine_rpm - b.engine_rpm).abs() < 0.01 * b.engine_rpm,
            "{file}: {} vs {}",
            a.engine_rpm,
            b.engine_rpm
        );
        assert_eq!(a.engaged_gear, b.engaged_gear, "{file}");
        let names = |app: &App, r: Entity| -> Vec<String> {
            app.world()
                .get::<DrivelineParts>(r)
                .unwrap()
                .parts()
                .iter()
                .map(|&e| app.world().get::<Name>(e).unwrap().to_string())
                .collect()
        };
        assert_eq!(names(&loaded, root2), names(&fresh, root3), "{file}: the same parts in the same order");
    }
}

/// A vehicle's `CycleDriver`, mid-drive (its integral, gear and phase moved), saves in a scene
/// and loads equal, its trace with it; a trace that breaks `Cycle::new`'s rules is refused by
/// the loader with a message, not loaded to panic later.
#[test]
fn a_cycle_driver_round_trips_through_a_scene() {
    use bevy_ecs::entity::EntityHashMap;
    use bevy_ecs::reflect::AppTypeRegistry;
    use bevy_world_serialization::DynamicWorldBuilder;
    use bevy_world_serialization::serde::WorldDeserializer;
    use driveline::core::vehicle::driver::Cycle;
    use serde::de::DeserializeSeed;

    let mut app = create_app();
    let spec = vehicle_spec("sedan_8hp.ron");
    let root = spawn_vehicle(app.world_mut(), spec.clone(), Road::Body).unwrap();
    let cycle = Cycle::new("launch", vec![0.0, 2.0, 10.0], vec![0.0, 0.0, 8.0]).unwrap();
    app.world_mut().entity_mut(root).insert(CycleDriver::new(&spec, std::sync::Arc::new(cycle)).starting_at(1.5, true));
    for _ in 0..120 {
        fixed_step(&mut app, Duration::from_nanos(16_666_667));
    }
    let before = app.world().get::<CycleDriver>(root).unwrap().clone();
    assert!(app.world().get::<VehicleInput>(root).unwrap().0.throttle > 0.0, "the driver drives off");
    let text = {
        let registry = app.world().resource::<AppTypeRegistry>().clone();
        let registry = registry.read();
        let saved =
            DynamicWorldBuilder::from_world(app.world(), &registry).extract_entities([root].into_iter()).build();
        saved.serialize(&registry).unwrap_or_else(|e| panic!("{e}"))
    };
    let load = |text: &str| {
        let mut loaded = create_app();
        let registry = loaded.world().resource::<AppTypeRegistry>().clone();
        let world = {
            let registry = registry.read();
            let mut de = ron::Deserializer::from_str(text).unwrap();
            WorldDeserializer { type_registry: &registry, load_from_path: &mut NoAssets }.deserialize(&mut de)
        };
        world.map(|w| {
            let mut map = EntityHashMap::default();
            w.write_to_world(loaded.world_mut(), &mut map).unwrap();
            loaded.world().get::<CycleDriver>(map[&root]).cloned()
        })
    };
    assert_eq!(load(&text).unwrap_or_else(|e| panic!("{e}")), Some(before));
    // The trace's last time made earlier than the one before it.
    let broken = text.replacen("10.0", "1.0", 1);
    assert_ne!(broken, text);
    let e = load(&broken).expect_err("a trace whose times do not increase");
    assert!(e.to_string().contains("does not increase"), "{e}");
}

#[derive(Resource, Default)]
struct OpenClutch(Option<Entity>);

/// A user's actuator: holds the clutch of the vehicle in `OpenClutch` open.
fn open_the_clutch(which: Res<OpenClutch>, mut clutches: Query<&mut ClutchEngagement>) {
    if let Some(mut e) = which.0.and_then(|c| clutches.get_mut(c).ok()) {
        e.0 = 0.0;
    }
}

#[test]
fn a_user_system_after_actuation_opens_a_vehicles_clutch() {
    let mut app = create_app();
    app.init_resource::<OpenClutch>();
    app.add_systems(FixedUpdate, open_the_clutch.after(DrivelineSystems::Actuation).before(DrivelineSystems::Solve));
    let root = pulling_350z(&mut app);
    let clutch = app.world().get::<VehicleParts>(root).unwrap().clutch.unwrap();
    let before = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    app.world_mut().resource_mut::<OpenClutch>().0 = Some(clutch);
    let frame = Duration::from_nanos(16_666_667);
    for _ in 0..12 {
        fixed_step(&mut app, frame);
        assert_eq!(app.world().get::<ClutchEngagement>(clutch).unwrap().0, 0.0, "the step used the user's value");
    }
    let after = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    // Open at full throttle: the clutch carries nothing, the engine runs free at its limiter
    // while the car, no longer driven, slows: the two sides slip apart.
    assert_eq!(app.world().get::<CouplingState>(clutch).unwrap().mode, Some(FrictionMode::Free));
    assert_eq!(after.clutch_torque, 0.0);
    assert!(after.engine_rpm >= before.engine_rpm - 200.0, "{} -> {}", before.engine_rpm, after.engine_rpm);
    // (The spinning rear tyres first push the car on while they spin down to road speed.)
    assert!(after.acceleration < 0.0, "{after:?}");
    assert!(after.clutch_slip.abs() > 10.0, "slip {}", after.clutch_slip);
    // Released: the built-in actuator (pedal up) closes it again.
    app.world_mut().resource_mut::<OpenClutch>().0 = None;
    for _ in 0..3 {
        fixed_step(&mut app, frame);
    }
    assert_eq!(app.world().get::<ClutchEngagement>(clutch).unwrap().0, 1.0);
}

#[test]
fn an_edit_in_place_gives_what_the_core_vehicle_gives_with_the_same_edit_bit_for_bit() {
    // The 350Z in third at 60 Hz; the final drive made 25 % shorter in both, then 30 frames.
    let spec = vehicle_spec("nissan_350z.ron");
    let mut core = Vehicle::new(spec.clone()).unwrap();
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), spec, Road::Body).unwrap();
    let frame = Duration::from_nanos(16_666_667);
    let dt = frame.as_secs_f64();
    for k in 0..630 {
        let t = k as f64 * dt;
        let input = driveline::core::vehicle::driver::first_to_third(t, 0.4);
        if k == 600 {
            let mut net = core.layout().spec.clone();
            for e in &mut net.elements {
                if let driveline::core::ElementKind::IdealGear { ratio, .. } = &mut e.kind
                    && e.name == "final_drive_r"
                {
                    *ratio *= 1.25;
                }
            }
            core.update_parameters(&net).unwrap();
            let fd = app.world().get::<DrivelineCache>(root).unwrap().simulation().unwrap().network();
            let k = fd.elements.iter().position(|e| e.name == "final_drive_r").unwrap();
            let part = app.world().get::<DrivelineCache>(root).unwrap().part(k).unwrap();
            app.world_mut().get_mut::<IdealGear>(part).unwrap().ratio *= 1.25;
        }
        core.step(&input, dt).unwrap();
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        fixed_step(&mut app, frame);
        let (ecs, c) = (app.world().get::<VehicleTelemetry>(root).unwrap().0, core.telemetry());
        assert_eq!(ecs.speed.to_bits(), c.speed.to_bits(), "at {t} s");
        assert_eq!(ecs.engine_rpm.to_bits(), c.engine_rpm.to_bits(), "at {t} s");
    }
    // The car kept its speed through the edit (the engine was pulled up to the new ratio).
    assert!(core.telemetry().speed > 8.0 && core.engaged_gear() == 3);
}

/// The rollback in the plugin: step, snapshot, step 8 frames, restore, step the same 8
/// frames: the same states and telemetry bit for bit; and a snapshot restores into another
/// app's vehicle of the same description, which then steps the same.
#[test]
fn a_vehicle_rolls_back_bit_for_bit_in_the_plugin() {
    let dt = Duration::from_secs_f64(1.0 / 60.0);
    let spawn =
        |app: &mut App| spawn_vehicle(app.world_mut(), vehicle_spec("sedan_8hp.ron"), Road::Body).expect("spawns");
    let mut app = create_app();
    let root = spawn(&mut app);
    let input = |k: usize| VehicleInput(driveline::core::vehicle::driver::first_to_third(k as f64 / 60.0, 0.8));
    for k in 0..240 {
        app.world_mut().entity_mut(root).insert(input(k));
        fixed_step(&mut app, dt);
    }
    let snap = snapshot_vehicle(app.world(), root).expect("running");
    let run = |app: &mut App, root: Entity| -> Vec<(String, driveline::core::VehicleSnapshot)> {
        (240..248)
            .map(|k| {
                app.world_mut().entity_mut(root).insert(input(k));
                fixed_step(app, dt);
                let telemetry = format!("{:?}", app.world().get::<VehicleTelemetry>(root).expect("telemetry").0);
                (telemetry, snapshot_vehicle(app.world(), root).expect("running"))
            })
            .collect()
    };
    let first = run(&mut app, root);
    restore_vehicle(app.world_mut(), root, &snap).expect("restores");
    let second = run(&mut app, root);
    assert!(first == second, "the frames after a rollback differ");
    assert!(first[7].1.time > snap.time + 0.1);
    // Another app: a vehicle of the same description at rest, restored to the snapshot.
    let mut other = create_app();
    let other_root = spawn(&mut other);
    fixed_step(&mut other, dt);
    restore_vehicle(other.world_mut(), other_root, &snap).expect("restores");
    assert!(run(&mut other, other_root) == first, "another app's vehicle differs after the restore");
    // A running vehicle of another description refuses it.
    let mut z = create_app();
    let z_root = spawn_vehicle(z.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).expect("spawns");
    fixed_step(&mut z, dt);
    assert!(matches!(
        restore_vehicle(z.world_mut(), z_root, &snap),
        Err(VehicleSnapshotError::Snapshot(driveline::core::SnapshotError::OtherVehicle { .. }))
    ));
}

/// The 8HP sedan with its TCU removed: the park pawl out and the lock-up open through
/// `DrivelineInputs`, the shift elements of `gear` (from the gearbox's shift matrix) applied
/// through their `ClutchEngagement`, 60 % throttle from 0.5 s, `seconds` at 60 Hz.
fn sedan_without_its_tcu(app: &mut App, gear: &str, seconds: f64) -> Entity {
    let spec = vehicle_spec("sedan_8hp.ron");
    let gearbox = spec.automatic.as_ref().and_then(|a| a.gearbox()).expect("the gearbox loaded").clone();
    let root = spawn_vehicle(app.world_mut(), spec, Road::Body).unwrap();
    app.world_mut().entity_mut(root).remove::<TransmissionController>();
    // (The first step builds the network and writes the start inputs: neutral, pawl in.)
    fixed_step(app, Duration::from_nanos(16_666_667));
    let mut inputs = app.world_mut().get_mut::<DrivelineInputs>(root).unwrap();
    inputs.set("park.engage", 0.0);
    inputs.set("lockup.force", 0.0);
    let applied = &gearbox.gears.iter().find(|(n, _)| n == gear).expect("a gear of the matrix").1;
    let elements = app.world().get::<VehicleParts>(root).unwrap().shift_elements.clone();
    for (e, spec) in elements.iter().zip(&gearbox.elements) {
        let on = applied.contains(&spec.name);
        app.world_mut().get_mut::<ClutchEngagement>(*e).unwrap().0 = if on { 1.0 } else { 0.0 };
    }
    let frame = Duration::from_nanos(16_666_667);
    for k in 0..(seconds * 60.0) as usize {
        let throttle = if k < 30 { 0.0 } else { 0.6 };
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = DriverInput { throttle, ..Default::default() };
        fixed_step(app, frame);
    }
    root
}

#[test]
fn without_its_tcu_an_automatic_holds_the_gear_its_elements_are_given() {
    let mut app = create_app();
    let root = sedan_without_its_tcu(&mut app, "2", 8.0);
    assert!(drain::<DrivelineStepFailed>(&mut app).is_empty());
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    // 2nd (A, B, E) locked, C and D open, as written; the TCU, at 60 % throttle, would have
    // shifted up long before 8 s (its upshift from 2nd is below 60 km/h).
    let locked: Vec<bool> = t.elements[..5].iter().map(|e| e.locked).collect();
    assert_eq!(locked, [true, true, false, false, true], "{:?}", t.elements);
    assert!(t.speed * 3.6 > 70.0, "{} km/h", t.speed * 3.6);
    let tcu = Vehicle::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron")).unwrap();
    let ratio2 = tcu.tcu().unwrap().forward_ratio(2).unwrap();
    let output = t.wheel_speed[2].max(t.wheel_speed[3]) * tcu.spec().driveline.final_drive;
    // Turbine over output speed is 2nd's ratio; the tyres' slip is in the wheel speeds, not here.
    assert!((t.turbine_rpm * driveline::core::torque_map::RPM / output / ratio2 - 1.0).abs() < 1e-6);
    // Back to the built-in controller, selector in D: it takes the box over from its own state
    // (neutral, where it was left) and engages the gear its schedule has for the road speed
    // (6th at 75 km/h and 60 %).
    app.world_mut().entity_mut(root).insert(TransmissionController);
    let mut gears = Vec::new();
    for _ in 0..300 {
        let input =
            DriverInput { throttle: 0.6, selector: driveline::core::automatic::Selector::Drive, ..Default::default() };
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        fixed_step(&mut app, Duration::from_nanos(16_666_667));
        gears.push(app.world().get::<VehicleTelemetry>(root).unwrap().0.engaged_gear);
    }
    assert!(drain::<DrivelineStepFailed>(&mut app).is_empty());
    assert!(*gears.last().unwrap() > 2, "{gears:?}");
}

#[test]
fn without_its_engine_controller_the_throttle_input_is_yours() {
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap();
    let engine = app.world().get::<VehicleParts>(root).unwrap().engine;
    let frame = Duration::from_nanos(16_666_667);
    fixed_step(&mut app, frame);
    // The idle controller's throttle, with the driver's pedal up.
    let idle = app.world().get::<VehicleTelemetry>(root).unwrap().0.throttle;
    assert!(idle > 0.0 && idle < 0.25, "idle throttle {idle}");
    app.world_mut().entity_mut(engine).remove::<EngineController>();
    app.world_mut().get_mut::<DrivelineInputs>(root).unwrap().set("engine.throttle", 0.25);
    for _ in 0..30 {
        fixed_step(&mut app, frame);
    }
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    // The engine in neutral revs up on a quarter throttle that no idle controller takes back.
    assert_eq!(t.throttle, 0.25);
    let idle_rpm = vehicle_spec("nissan_350z.ron").engine.idle_rpm;
    assert!(t.engine_rpm > 1.5 * idle_rpm, "{} rpm (idle {idle_rpm})", t.engine_rpm);
    // Handed back: the component again, and the input no longer written over it.
    app.world_mut().entity_mut(engine).insert(EngineController);
    assert_eq!(app.world_mut().get_mut::<DrivelineInputs>(root).unwrap().remove("engine.throttle"), Some(0.25));
    fixed_step(&mut app, frame);
    assert_ne!(app.world().get::<VehicleTelemetry>(root).unwrap().0.throttle, 0.25);
}

#[test]
fn a_fleet_writes_back_every_part_state() {
    // 20 drivelines: past the threshold from which the write-back runs over the part tables in
    // parallel. Flywheel k (J = 2 kg m^2) under 0.5 k N m reaches w = 0.25 k t, phi = 0.125 k t^2.
    let mut app = create_app();
    let wheels: Vec<Entity> = (0..20).map(|k| flywheel(&mut app, 2.0, 0.5 * k as f64).1).collect();
    for _ in 0..10 {
        fixed_step(&mut app, Duration::from_millis(10));
    }
    for (k, &w) in wheels.iter().enumerate() {
        let s = app.world().get::<BodyState>(w).unwrap();
        // Constant acceleration: the collocation is exact to rounding.
        assert!((s.speed - 0.25 * k as f64 * 0.1).abs() < 1e-12, "wheel {k}: {s:?}");
        assert!((s.angle - 0.125 * k as f64 * 0.01).abs() < 1e-12, "wheel {k}: {s:?}");
    }
}

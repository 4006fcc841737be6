//! A vehicle's built-in controllers as systems in the public sets: the transmission and engine
//! controllers in `Control` (`control_vehicles`), the actuators in `Actuation` writing each clutch's and brake's
//! `ClutchEngagement`, what users write after them winning for the step (in every sub-step
//! of a shift at a game step), states written in `Control` taken before the solve.

mod common;
use bevy_app::FixedUpdate;
use bevy_ecs::message::Messages;
use bevy_ecs::name::Name;
use bevy_ecs::prelude::*;
use common::*;
use driveline::bevy::prelude::*;
use driveline::bevy::vehicle::control_vehicles;
use driveline::core::DriverInput;
use driveline::core::vehicle::Road;
use std::time::Duration;

const FRAME: Duration = Duration::from_nanos(16_666_667);

/// The engagements a system between `Actuation` and `Solve` sees: the driver's clutch and the
/// front left brake.
#[derive(Resource, Default)]
struct Seen(Vec<(f64, f64)>);

fn watch_engagements(mut seen: ResMut<Seen>, cars: Query<&VehicleParts>, engagements: Query<&ClutchEngagement>) {
    for parts in &cars {
        let clutch = parts.clutch.and_then(|c| engagements.get(c).ok()).map_or(f64::NAN, |e| e.0);
        let brake = engagements.get(parts.brakes[0]).map_or(f64::NAN, |e| e.0);
        seen.0.push((clutch, brake));
    }
}

#[test]
fn the_actuators_write_each_clutch_and_brake_engagement_in_actuation() {
    // The 350Z pulls away: the pedal released over 2 s at 60 Hz, then the brake applied. What a
    // system after `Actuation` reads is what the step then uses (the telemetry's
    // `clutch_engagement`, written after the step, is the actuator's command of that step).
    let mut app = create_app();
    app.init_resource::<Seen>();
    app.add_systems(FixedUpdate, watch_engagements.after(DrivelineSystems::Actuation).before(DrivelineSystems::Solve));
    let root = spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap();
    let mut used = Vec::new();
    for k in 0..300 {
        let t = k as f64 / 60.0;
        let input = DriverInput {
            gear: 1,
            throttle: if (0.5..3.0).contains(&t) { 0.3 } else { 0.0 },
            clutch: if t < 0.5 { 1.0 } else { (1.0 - (t - 0.5) / 2.0).max(0.0) },
            brake: if t >= 3.5 { 0.6 } else { 0.0 },
            ..Default::default()
        };
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        fixed_step(&mut app, FRAME);
        used.push(app.world().get::<VehicleTelemetry>(root).unwrap().0.clutch_engagement);
    }
    let seen = &app.world().resource::<Seen>().0;
    assert_eq!(seen.len(), 300, "the controllers ran on every tick, the first included");
    for (k, ((clutch, _), used)) in seen.iter().zip(&used).enumerate() {
        assert_eq!(clutch.to_bits(), used.to_bits(), "tick {k}: seen {clutch}, used {used}");
    }
    // The actuator's command went through the release (not only the end values).
    assert!(seen.iter().any(|s| s.0 > 0.2 && s.0 < 0.8), "{seen:?}");
    // Brakes: off, then the pedal's 0.6 on the front brakes (their command is the pedal).
    assert_eq!(seen[100].1, 0.0);
    assert_eq!(seen[299].1, 0.6);
}

#[test]
fn an_input_written_over_a_running_engine_controller_wins_in_every_sub_step() {
    // The 8HP sedan at 60 Hz, full pedal, with `engine.throttle` held at 0.5 in DrivelineInputs
    // while its engine controller runs: every step (the upshifts' sub-steps included, where the
    // TCU asks for torque reductions) uses 0.5. Removed, the engine controller has it again.
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), vehicle_spec("sedan_8hp.ron"), Road::Body).unwrap();
    fixed_step(&mut app, FRAME);
    app.world_mut().get_mut::<DrivelineInputs>(root).unwrap().set("engine.throttle", 0.5);
    let input =
        DriverInput { throttle: 1.0, selector: driveline::core::automatic::Selector::Drive, ..Default::default() };
    let mut shifts = 0;
    for _ in 0..(8 * 60) {
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        fixed_step(&mut app, FRAME);
        let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
        assert_eq!(t.throttle, 0.5, "at {} s", t.time);
        shifts = shifts.max(t.engaged_gear);
    }
    assert!(shifts >= 3, "the box shifted up through the gears ({shifts})");
    assert_eq!(app.world_mut().get_mut::<DrivelineInputs>(root).unwrap().remove("engine.throttle"), Some(0.5));
    for _ in 0..30 {
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        fixed_step(&mut app, FRAME);
    }
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert!(t.throttle > 0.9, "the engine controller passes the full pedal on: {}", t.throttle);
}

#[derive(Resource, Default)]
struct WriteSpeed(Option<(Entity, f64)>);

/// A user's reset in `Control`: sets a body's speed once.
fn write_speed(mut which: ResMut<WriteSpeed>, mut states: Query<&mut BodyState>) {
    if let Some((e, w)) = which.0.take()
        && let Ok(mut s) = states.get_mut(e)
    {
        s.speed = w;
    }
}

#[test]
fn a_state_written_in_control_or_actuation_is_where_the_step_starts() {
    // 2 N m on 0.5 kg m^2 (4 rad/s^2): written 10 rad/s at t = 0.5 s by a system in `Control`,
    // the wheel turns at 10 + 4 * 0.1 ten 10 ms steps later; then 20 rad/s written in
    // `Actuation`. Constant torque: the steps are exact, the tolerance is rounding.
    for set in [DrivelineSystems::Control, DrivelineSystems::Actuation] {
        let mut app = create_app();
        app.init_resource::<WriteSpeed>();
        app.add_systems(FixedUpdate, write_speed.in_set(set));
        let world = app.world_mut();
        let root = world.spawn(Driveline::default()).id();
        let wheel = world
            .spawn((Name::new("J"), Inertia { j: 0.5, phi_start: Some(0.0), w_start: Some(0.0) }, PartOf(root)))
            .id();
        world.spawn((
            Name::new("motor"),
            ConstantTorque { tau_constant: 2.0, use_support: false },
            PartOf(root),
            Connections::new().with("flange", wheel, "flange_a"),
        ));
        for _ in 0..50 {
            fixed_step(&mut app, Duration::from_millis(10));
        }
        app.world_mut().resource_mut::<WriteSpeed>().0 = Some((wheel, 10.0));
        for _ in 0..10 {
            fixed_step(&mut app, Duration::from_millis(10));
        }
        let w = app.world().get::<BodyState>(wheel).unwrap().speed;
        assert!((w - 10.4).abs() < 1e-12, "{set:?}: {w}");
    }
}

#[derive(Resource, Default)]
struct Order(Vec<&'static str>);

#[test]
fn the_controllers_are_systems_a_user_can_order_against() {
    // Systems ordered before and after the vehicles' controllers and in `Actuation` run where
    // they are put, and see the controllers' work as it stands there: before them the tick's
    // telemetry is the last step's, the engagement after `Actuation` is this step's.
    let mut app = create_app();
    app.init_resource::<Order>();
    app.add_systems(
        FixedUpdate,
        (
            (|mut o: ResMut<Order>| o.0.push("before")).before(control_vehicles).in_set(DrivelineSystems::Control),
            (|mut o: ResMut<Order>| o.0.push("after")).after(control_vehicles).in_set(DrivelineSystems::Control),
            (|mut o: ResMut<Order>| o.0.push("actuation")).in_set(DrivelineSystems::Actuation),
        ),
    );
    spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap();
    fixed_step(&mut app, FRAME);
    assert_eq!(app.world().resource::<Order>().0, ["before", "after", "actuation"]);
}

/// The 350Z pulled away in 1st: the pedal released over 2 s from 0.5 s at 30 % throttle, then
/// held up; `ticks` at 60 Hz.
fn pulled_away(app: &mut bevy_app::App, root: Entity, from: usize, ticks: usize) {
    for k in from..from + ticks {
        let t = k as f64 / 60.0;
        let input = DriverInput {
            gear: 1,
            throttle: if t >= 0.5 { 0.3 } else { 0.0 },
            clutch: if t < 0.5 { 1.0 } else { (1.0 - (t - 0.5) / 2.0).max(0.0) },
            ..Default::default()
        };
        app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
        fixed_step(app, FRAME);
    }
}

#[test]
fn without_its_clutch_actuator_a_manual_clutch_keeps_the_engagement_you_write() {
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap();
    let clutch = app.world().get::<VehicleParts>(root).unwrap().clutch.expect("a manual");
    assert!(app.world().get::<ClutchActuator>(clutch).is_some(), "spawned with its actuator");
    pulled_away(&mut app, root, 0, 240);
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert_eq!(t.engaged_gear, 1);
    assert!(t.clutch_slip.abs() < 1e-6, "pulled away: the clutch is in ({} rad/s slip)", t.clutch_slip);
    let actuated = app.world().get::<ClutchEngagement>(clutch).unwrap().0;
    assert!(actuated > 0.99, "pedal up: {actuated}");
    // With the actuator, a value written once holds for one step: the actuator's pedal is back
    // in the next.
    app.world_mut().get_mut::<ClutchEngagement>(clutch).unwrap().0 = 0.0;
    pulled_away(&mut app, root, 240, 2);
    assert_eq!(app.world().get::<ClutchEngagement>(clutch).unwrap().0, actuated);
    // Without it, the clutch stays open as written while the pedal stays up: the engine,
    // unloaded at 30 % throttle, runs away from the wheels, held by its own controller's
    // limiter; the gear stays in (the linkages and the shift controller still run).
    app.world_mut().entity_mut(clutch).remove::<ClutchActuator>();
    app.world_mut().get_mut::<ClutchEngagement>(clutch).unwrap().0 = 0.0;
    let mut rpm: Vec<f64> = Vec::new();
    for k in 0..120 {
        pulled_away(&mut app, root, 242 + k, 1);
        assert_eq!(app.world().get::<ClutchEngagement>(clutch).unwrap().0, 0.0, "tick {k}");
        rpm.push(app.world().get::<VehicleTelemetry>(root).unwrap().0.engine_rpm);
    }
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert!(t.clutch_slip.abs() > 10.0 && t.clutch_torque.abs() < 1e-9, "open: {t:?}");
    assert_eq!(t.clutch_engagement, 0.0, "the telemetry reports the force written");
    assert_eq!(t.engaged_gear, 1);
    let spec = vehicle_spec("nissan_350z.ron");
    let peak = rpm.iter().cloned().fold(0.0, f64::max);
    assert!(peak > rpm[0] + 1000.0, "the unloaded engine revs up: {} to {peak} rpm", rpm[0]);
    let limit = spec.engine.rev_limiter.rpm;
    assert!(peak < limit + 300.0, "its limiter ({limit} rpm) holds it: {peak} rpm");
    // Handed back: the actuator's pedal (up) again from the next step.
    app.world_mut().entity_mut(clutch).insert(ClutchActuator);
    pulled_away(&mut app, root, 362, 1);
    assert_eq!(app.world().get::<ClutchEngagement>(clutch).unwrap().0, actuated);
    assert!(app.world_mut().resource_mut::<Messages<DrivelineStepFailed>>().drain().next().is_none());
}

#[test]
fn without_one_hydraulic_piston_an_automatic_element_keeps_the_engagement_you_write() {
    // The 8HP sedan in D at 30 % throttle: element B is applied in gears 1 to 5. Its piston
    // removed and its engagement written 0, B opens and stays open; the TCU still drives the
    // others.
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), vehicle_spec("sedan_8hp.ron"), Road::Body).unwrap();
    let elements = app.world().get::<VehicleParts>(root).unwrap().shift_elements.clone();
    assert!(elements.iter().all(|&e| app.world().get::<HydraulicPiston>(e).is_some()));
    let input =
        DriverInput { throttle: 0.3, selector: driveline::core::automatic::Selector::Drive, ..Default::default() };
    let drive = |app: &mut bevy_app::App, ticks: usize| {
        for _ in 0..ticks {
            app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
            fixed_step(app, FRAME);
        }
    };
    drive(&mut app, 120);
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert!((1..=5).contains(&t.engaged_gear) && t.elements[1].locked, "B applied: {:?}", t.elements[1]);
    app.world_mut().entity_mut(elements[1]).remove::<HydraulicPiston>();
    app.world_mut().get_mut::<ClutchEngagement>(elements[1]).unwrap().0 = 0.0;
    for k in 0..60 {
        drive(&mut app, 1);
        assert_eq!(app.world().get::<ClutchEngagement>(elements[1]).unwrap().0, 0.0, "tick {k}");
    }
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert!(!t.elements[1].locked && t.elements[1].force == 0.0, "B open as written: {:?}", t.elements[1]);
    assert!(t.elements[1].torque.abs() < 1e-9, "B carries nothing: {} N m", t.elements[1].torque);
    // The pistons of the others still follow the TCU: the telemetry's force is what their
    // engagement holds.
    for k in [0, 2, 3, 4] {
        let e = app.world().get::<ClutchEngagement>(elements[k]).unwrap().0;
        assert_eq!(e, t.elements[k].force, "element {k}");
    }
    assert!(t.elements.iter().filter(|e| e.force > 0.9).count() >= 2, "the TCU still applies its gear's others");
    // Handed back: B's piston applies it again and it locks.
    app.world_mut().entity_mut(elements[1]).insert(HydraulicPiston);
    drive(&mut app, 120);
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert!(t.elements[1].locked && (1..=5).contains(&t.engaged_gear), "B applied again: {:?}", t.elements);
    assert!(app.world_mut().resource_mut::<Messages<DrivelineStepFailed>>().drain().next().is_none());
}

#[test]
fn without_its_shift_linkage_a_dog_keeps_the_engagement_you_write() {
    // The 350Z pulled away in 1st (a friction-model dog box: each dog is a clutch part whose
    // engagement the sleeve writes).
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap();
    let parts = app.world().get::<VehicleParts>(root).unwrap().clone();
    assert_eq!(parts.dogs.len(), 7, "six forward gears and reverse");
    assert!(parts.dogs.iter().all(|&d| app.world().get::<ShiftLinkage>(d).is_some()), "spawned with linkages");
    let names: Vec<&str> = parts.dogs.iter().map(|&d| app.world().get::<Name>(d).unwrap().as_str()).collect();
    assert_eq!(names, ["dog1", "dog2", "dog3", "dog4", "dog5", "dog6", "dogr"]);
    let dog = parts.dogs[0];
    pulled_away(&mut app, root, 0, 240);
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert_eq!(t.engaged_gear, 1);
    assert_eq!(app.world().get::<ClutchEngagement>(dog).unwrap().0, 1.0, "the sleeve holds the dog in");
    // With the linkage, a value written once holds for one step: the sleeve's is back in the
    // next.
    app.world_mut().get_mut::<ClutchEngagement>(dog).unwrap().0 = 0.0;
    pulled_away(&mut app, root, 240, 2);
    assert_eq!(app.world().get::<ClutchEngagement>(dog).unwrap().0, 1.0);
    assert_eq!(app.world().get::<VehicleTelemetry>(root).unwrap().0.engaged_gear, 1);
    // Without it, the dog stays out as written: no gear is engaged although 1st is selected
    // and the sleeve stays in; the engine, clutch in at 30 % throttle and unloaded, runs away
    // from the wheels, held by its limiter; the clutch's actuator still holds the pedal up.
    app.world_mut().entity_mut(dog).remove::<ShiftLinkage>();
    app.world_mut().get_mut::<ClutchEngagement>(dog).unwrap().0 = 0.0;
    let mut rpm: Vec<f64> = Vec::new();
    for k in 0..120 {
        pulled_away(&mut app, root, 242 + k, 1);
        assert_eq!(app.world().get::<ClutchEngagement>(dog).unwrap().0, 0.0, "tick {k}");
        let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
        assert_eq!(t.engaged_gear, 0, "tick {k}: the dog is out");
        rpm.push(t.engine_rpm);
    }
    let torque = app.world().get::<CouplingState>(dog).unwrap().torque;
    assert!(torque.abs() < 1e-9, "the open dog carries nothing: {torque} N m");
    let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
    assert!(t.clutch_engagement > 0.99, "the clutch actuator still holds it in: {}", t.clutch_engagement);
    let peak = rpm.iter().cloned().fold(0.0, f64::max);
    assert!(peak > rpm[0] + 1000.0, "the unloaded engine revs up: {} to {peak} rpm", rpm[0]);
    let limit = vehicle_spec("nissan_350z.ron").engine.rev_limiter.rpm;
    assert!(peak < limit + 300.0, "its limiter ({limit} rpm) holds it: {peak} rpm");
    // The other gears' linkages still write theirs: the sleeves carrying them stay neutral.
    for &other in &parts.dogs[1..] {
        assert_eq!(app.world().get::<ClutchEngagement>(other).unwrap().0, 0.0);
    }
    // Handed back: the sleeve, still in, puts the dog in again from the next step.
    app.world_mut().entity_mut(dog).insert(ShiftLinkage);
    pulled_away(&mut app, root, 362, 1);
    assert_eq!(app.world().get::<ClutchEngagement>(dog).unwrap().0, 1.0);
    assert_eq!(app.world().get::<VehicleTelemetry>(root).unwrap().0.engaged_gear, 1);
    assert!(app.world_mut().resource_mut::<Messages<DrivelineStepFailed>>().drain().next().is_none());
}

/// Whether the vehicles' phases run inside their step, as the schedule's ordering allows: a
/// user system that runs before the controllers or after the step leaves them there; one in
/// `Control` after the controllers, in `Actuation`, unordered, or a run condition on a phase's
/// set, makes them systems again (each decided when the schedule is built).
#[test]
fn the_phases_run_in_the_step_unless_a_system_runs_between() {
    fn fused(configure: impl FnOnce(&mut bevy_app::App)) -> bool {
        let mut app = create_app();
        configure(&mut app);
        spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap();
        fixed_step(&mut app, FRAME);
        app.world().resource::<FusedVehicleSteps>().is_fused()
    }
    assert!(fused(|_| {}), "the plugin's schedule alone");
    assert!(fused(|app| {
        app.add_systems(
            FixedUpdate,
            (
                (|| {}).in_set(DrivelineSystems::Input),
                (|| {}).before(control_vehicles).in_set(DrivelineSystems::Control),
                (|| {}).in_set(DrivelineSystems::Integrate),
                (|| {}).in_set(DrivelineSystems::Telemetry),
            ),
        );
    }));
    assert!(!fused(|app| {
        app.add_systems(FixedUpdate, (|| {}).after(control_vehicles).in_set(DrivelineSystems::Control));
    }));
    assert!(!fused(|app| {
        app.add_systems(FixedUpdate, (|| {}).in_set(DrivelineSystems::Actuation));
    }));
    assert!(!fused(|app| {
        app.add_systems(FixedUpdate, (|| {}).after(DrivelineSystems::Actuation).before(DrivelineSystems::Solve));
    }));
    assert!(
        !fused(|app| {
            app.add_systems(FixedUpdate, || {});
        }),
        "a system ordered against nothing may run anywhere"
    );
    assert!(!fused(|app| {
        app.configure_sets(FixedUpdate, DrivelineSystems::Actuation.run_if(|| true));
    }));
    // A system added later rebuilds the schedule, and the phases become systems from then on.
    let mut app = create_app();
    spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap();
    fixed_step(&mut app, FRAME);
    assert!(app.world().resource::<FusedVehicleSteps>().is_fused());
    app.add_systems(FixedUpdate, (|| {}).in_set(DrivelineSystems::Actuation));
    fixed_step(&mut app, FRAME);
    assert!(!app.world().resource::<FusedVehicleSteps>().is_fused());
}

/// A user's write of an engagement equal to the one the part holds is a write, not the
/// actuator's value: it holds the clutch there for the step while the pedal moves, whether the
/// phases run in the step or as systems.
#[test]
fn an_engagement_written_as_it_stands_holds_for_the_step_on_either_path() {
    for phased in [false, true] {
        let mut app = create_app();
        if phased {
            app.add_systems(FixedUpdate, (|| {}).in_set(DrivelineSystems::Actuation));
        }
        let root = spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap();
        let clutch = app.world().get::<VehicleParts>(root).unwrap().clutch.expect("a manual");
        // Half way through the pedal's release (0.5 s to 2.5 s): the actuator moves the
        // engagement every tick.
        pulled_away(&mut app, root, 0, 90);
        assert_eq!(app.world().resource::<FusedVehicleSteps>().is_fused(), !phased);
        let held = app.world().get::<ClutchEngagement>(clutch).unwrap().0;
        app.world_mut().get_mut::<ClutchEngagement>(clutch).unwrap().0 = held;
        pulled_away(&mut app, root, 90, 1);
        let after = app.world().get::<ClutchEngagement>(clutch).unwrap().0;
        assert_eq!(after.to_bits(), held.to_bits(), "phased: {phased}");
        let t = app.world().get::<VehicleTelemetry>(root).unwrap().0;
        assert_eq!(t.clutch_engagement.to_bits(), held.to_bits(), "phased: {phased}: the step used it");
        pulled_away(&mut app, root, 91, 1);
        let moved = app.world().get::<ClutchEngagement>(clutch).unwrap().0;
        assert_ne!(moved.to_bits(), held.to_bits(), "phased: {phased}: the actuator's again");
    }
}

/// The same in a fleet, whose cars write their parts in their step (from 16 drivelines on): a
/// user's write of one car's engagement, equal to what the part holds, holds that car's clutch
/// for the step while the other cars' actuators move theirs.
#[test]
fn an_engagement_written_in_a_fleet_holds_that_cars_clutch_alone() {
    let mut app = create_app();
    let roots: Vec<Entity> =
        (0..17).map(|_| spawn_vehicle(app.world_mut(), vehicle_spec("nissan_350z.ron"), Road::Body).unwrap()).collect();
    let clutch = |app: &bevy_app::App, root: Entity| app.world().get::<VehicleParts>(root).unwrap().clutch.unwrap();
    let all_pulled_away = |app: &mut bevy_app::App, from: usize, ticks: usize| {
        for k in from..from + ticks {
            let t = k as f64 / 60.0;
            for &root in &roots {
                app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = DriverInput {
                    gear: 1,
                    throttle: if t >= 0.5 { 0.3 } else { 0.0 },
                    clutch: if t < 0.5 { 1.0 } else { (1.0 - (t - 0.5) / 2.0).max(0.0) },
                    ..Default::default()
                };
            }
            fixed_step(app, FRAME);
        }
    };
    all_pulled_away(&mut app, 0, 90);
    assert!(app.world().resource::<FusedVehicleSteps>().is_fused());
    let (written, other) = (clutch(&app, roots[5]), clutch(&app, roots[4]));
    let held = app.world().get::<ClutchEngagement>(written).unwrap().0;
    let before = app.world().get::<ClutchEngagement>(other).unwrap().0;
    assert_eq!(held.to_bits(), before.to_bits(), "the cars drive alike");
    app.world_mut().get_mut::<ClutchEngagement>(written).unwrap().0 = held;
    all_pulled_away(&mut app, 90, 1);
    let after = app.world().get::<ClutchEngagement>(written).unwrap().0;
    assert_eq!(after.to_bits(), held.to_bits(), "the written car's clutch held");
    let t = app.world().get::<VehicleTelemetry>(roots[5]).unwrap().0;
    assert_eq!(t.clutch_engagement.to_bits(), held.to_bits(), "its step used it");
    let moved = app.world().get::<ClutchEngagement>(other).unwrap().0;
    assert_ne!(moved.to_bits(), held.to_bits(), "the other cars' actuators moved theirs");
}

/// A component of the test's own, on a part: the part moves to another table.
#[derive(Component)]
struct Tagged;

/// The fleet's part writes keep where each part was last found, and check it before use. Mid-run,
/// cars are despawned (a table fills each hole with its last row, another car's part) and a
/// part of another car gets a component of the user's (it moves to another table, and a third
/// car's part takes its row): every part left still gets its state, bit for bit, and the other
/// cars' networks are not rebuilt for it.
#[test]
fn a_fleet_whose_parts_move_between_rows_still_writes_them_bit_for_bit() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let mut core = driveline::core::vehicle::Vehicle::load(&path).unwrap();
    let mut app = create_app();
    let roots: Vec<Entity> =
        (0..22).map(|_| spawn_vehicle(app.world_mut(), core.spec().clone(), Road::Body).unwrap()).collect();
    let (first, second, tagged) = (roots[2], roots[12], roots[5]);
    common::fleet_parts_hold_the_core_state_with(&mut app, &mut core, &roots, |app, k| {
        if k == 300 {
            app.world_mut().despawn(first);
            let engine = app.world().get::<driveline::bevy::DrivelineCache>(tagged).unwrap().part(0).unwrap();
            app.world_mut().entity_mut(engine).insert(Tagged);
        }
        if k == 600 {
            app.world_mut().despawn(second);
        }
    });
    assert!(app.world().get_entity(first).is_err() && app.world().get_entity(second).is_err());
    for &root in roots.iter().filter(|&&r| r != first && r != second) {
        assert_eq!(app.world().get::<driveline::bevy::DrivelineCache>(root).unwrap().generation(), 1, "built once");
    }
}

/// The fleet step's cache hints change the speed only: three sedans driven with the hints
/// always on and never on end in the same telemetry to the bit, and `CacheHints` says which
/// the step did (the other fleet tests run under the default `Auto`, whose trial alternates).
#[test]
fn cache_hints_change_a_fleets_speed_and_not_a_bit_of_its_motion() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron");
    let spec = driveline::core::vehicle::Vehicle::load(&path).unwrap().spec().clone();
    let drive = |policy: CacheHintPolicy| {
        let mut app = create_app();
        app.insert_resource(CacheHints::new(policy));
        let roots: Vec<Entity> =
            (0..3).map(|_| spawn_vehicle(app.world_mut(), spec.clone(), Road::Body).unwrap()).collect();
        for k in 0..400 {
            for (i, &root) in roots.iter().enumerate() {
                let mut input = app.world_mut().get_mut::<VehicleInput>(root).unwrap();
                input.0.selector = driveline::core::automatic::Selector::Drive;
                input.0.throttle = if k < 100 { 0.0 } else { 0.3 + 0.2 * i as f64 };
            }
            fixed_step(&mut app, Duration::from_millis(1));
        }
        let hinting = app.world().resource::<CacheHints>().hinting();
        let bits: Vec<Vec<u64>> = roots
            .iter()
            .map(|&r| {
                let t = &app.world().get::<VehicleTelemetry>(r).unwrap().0;
                [t.time, t.speed, t.engine_rpm, t.engine_torque, t.distance, t.acceleration].map(f64::to_bits).to_vec()
            })
            .collect();
        (hinting, bits)
    };
    let (on, with) = drive(CacheHintPolicy::Always);
    let (off, without) = drive(CacheHintPolicy::Never);
    assert!(on && !off);
    assert!(with[2][1] > with[0][1], "the cars drove apart: {with:?}");
    assert_eq!(with, without);
}

#[test]
fn the_plugins_resources_are_registered_for_reflection() {
    use bevy_ecs::reflect::{AppTypeRegistry, ReflectResource};
    let app = create_app();
    let registry = app.world().resource::<AppTypeRegistry>().read();
    for id in [std::any::TypeId::of::<CacheHints>(), std::any::TypeId::of::<FusedVehicleSteps>()] {
        let reg = registry.get(id).unwrap_or_else(|| panic!("{id:?} is not registered"));
        assert!(reg.data::<ReflectResource>().is_some(), "{} lacks ReflectResource", reg.type_info().type_path());
    }
    assert!(registry.get(std::any::TypeId::of::<CacheHintPolicy>()).is_some());
}

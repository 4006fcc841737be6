//! A vehicle's built-in controllers as systems in the public sets: the transmission and engine
//! controllers in `Control` (`control_vehicles`), the actuators in `Actuation` writing each clutch's and brake's
//! `ClutchEngagement`, what users write after them winning for the step (in every sub-step
//! of a shift at a game step), states written in `Control` taken before the solve.

mod common;
use bevy_app::FixedUpdate;
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

//! A vehicle on a game's chassis in the plugin: the wheel parts carry `WheelContact` (written
//! by the game) and `WheelForces` (read back); the plugin's step equals the core
//! `Vehicle::new_chassis` given the same contacts, bit for bit; a non-finite contact is
//! refused by name.

mod common;

use bevy_ecs::message::Messages;
use common::{create_app, fixed_step, vehicle_spec};
use driveline::bevy::prelude::*;
use driveline::core::DriverInput;
use driveline::core::automatic::Selector;
use driveline::core::vehicle::{self as core, Road, Vehicle};
use std::time::Duration;

/// A point-mass chassis on the flat: what a game would write for each wheel at speed `v`.
fn contacts(spec: &driveline::core::VehicleSpec, v: f64) -> [core::WheelContact; 4] {
    std::array::from_fn(|k| core::WheelContact {
        load: core::build::chassis_mass(&spec.body, k) * core::G,
        speed_along: v,
        ..Default::default()
    })
}

#[test]
fn the_plugin_steps_a_chassis_vehicle_as_the_core_does() {
    steps_as_the_core_does(None);
}

#[test]
fn at_its_own_rate_inside_the_physics_step_the_plugin_steps_as_the_core_does() {
    // The driveline at 1 kHz inside the 60 Hz tick: 17 sub-steps, the first one's phases in
    // `Control` and `Actuation`, the others inside `Solve`; the core takes them in `step`.
    steps_as_the_core_does(Some(1000.0));
}

/// The plugin's vehicle and the core's, given the same contacts at 60 Hz for 3 s (the plugin's
/// at `rate`, Hz, with `DrivelineRate`; the core's with `set_max_step`), are equal bit for bit.
fn steps_as_the_core_does(rate: Option<f64>) {
    let spec = vehicle_spec("sedan_8hp.ron");
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), spec.clone(), Road::Chassis).unwrap();
    let mut car = Vehicle::new_chassis(spec.clone()).unwrap();
    if let Some(hz) = rate {
        app.world_mut().entity_mut(root).insert(DrivelineRate(hz));
        car.set_max_step(Some(1.0 / hz)).unwrap();
    }
    // The fixed step as the plugin's clock has it (whole nanoseconds).
    let tick = Duration::from_secs_f64(1.0 / 60.0);
    let dt = tick.as_secs_f64();
    let input = DriverInput { selector: Selector::Drive, throttle: 0.5, ..Default::default() };
    app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
    let wheels = app.world().get::<VehicleParts>(root).unwrap().wheels.clone();
    assert_eq!(wheels.len(), 4);
    for &w in &wheels {
        assert!(app.world().get::<WheelContact>(w).is_some() && app.world().get::<WheelForces>(w).is_some());
    }
    // Both chassis integrated explicitly from the forces read back, as a game does.
    let (mut v_plugin, mut v_core) = (0.0f64, 0.0f64);
    for _ in 0..180 {
        for (k, c) in contacts(&spec, v_plugin).into_iter().enumerate() {
            *app.world_mut().get_mut::<WheelContact>(wheels[k]).unwrap() = WheelContact(c);
        }
        fixed_step(&mut app, tick);
        for (k, c) in contacts(&spec, v_core).into_iter().enumerate() {
            car.set_chassis_contact(k, &c).unwrap();
        }
        car.step(&input, dt).unwrap();
        let mut sum = (0.0, 0.0);
        for (k, &w) in wheels.iter().enumerate() {
            let f = *app.world().get::<WheelForces>(w).unwrap();
            let expected = WheelForces(car.wheel_forces(k));
            assert_eq!(f, expected, "wheel {k}");
            sum.0 += f.0.longitudinal;
            sum.1 += expected.0.longitudinal;
        }
        v_plugin += dt * sum.0 / spec.body.mass;
        v_core += dt * sum.1 / spec.body.mass;
        assert_eq!(app.world().get::<VehicleTelemetry>(root).unwrap().0, *car.telemetry());
    }
    assert!(v_plugin > 5.0, "the car did not launch: {v_plugin} m/s");
    assert_eq!(v_plugin.to_bits(), v_core.to_bits());
}

#[test]
fn a_bad_driveline_rate_is_refused_and_the_last_valid_one_kept() {
    let spec = vehicle_spec("sedan_8hp.ron");
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), spec, Road::Chassis).unwrap();
    app.world_mut().entity_mut(root).insert(DrivelineRate(500.0));
    let tick = Duration::from_secs_f64(1.0 / 60.0);
    fixed_step(&mut app, tick);
    let max_step = |app: &bevy_app::App| {
        let vc = app.world().get::<VehicleController>(root).unwrap();
        vc.control().and_then(|c| c.max_step())
    };
    assert_eq!(max_step(&app), Some(1.0 / 500.0));
    let drain = |app: &mut bevy_app::App| -> Vec<DrivelineEditRefused> {
        app.world_mut().resource_mut::<Messages<DrivelineEditRefused>>().drain().collect()
    };
    drain(&mut app);
    for bad in [f64::NAN, 0.0, -60.0, f64::INFINITY, 2e6] {
        app.world_mut().get_mut::<DrivelineRate>(root).unwrap().0 = bad;
        fixed_step(&mut app, tick);
        let refused = drain(&mut app);
        assert_eq!(refused.len(), 1, "{bad}: {refused:?}");
        assert!(refused[0].message.contains(&format!("DrivelineRate {bad} Hz")), "{}", refused[0].message);
        assert_eq!(max_step(&app), Some(1.0 / 500.0), "{bad}");
        // Reported once, when written.
        fixed_step(&mut app, tick);
        assert!(drain(&mut app).is_empty(), "{bad} reported again");
        assert_eq!(max_step(&app), Some(1.0 / 500.0), "{bad}");
    }
    // Removed: the driveline steps once per tick again.
    app.world_mut().entity_mut(root).remove::<DrivelineRate>();
    fixed_step(&mut app, tick);
    assert_eq!(max_step(&app), None);
}

#[test]
fn a_non_finite_contact_is_refused_by_wheel_and_field() {
    let spec = vehicle_spec("sedan_8hp.ron");
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), spec.clone(), Road::Chassis).unwrap();
    let wheels = app.world().get::<VehicleParts>(root).unwrap().wheels.clone();
    fixed_step(&mut app, Duration::from_millis(10));
    app.world_mut().get_mut::<WheelContact>(wheels[2]).unwrap().0.load = f64::INFINITY;
    fixed_step(&mut app, Duration::from_millis(10));
    let refused: Vec<_> =
        app.world().resource::<Messages<DrivelineEditRefused>>().iter_current_update_messages().cloned().collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].part, wheels[2]);
    assert!(refused[0].message.contains("rl") && refused[0].message.contains("`load`"), "{}", refused[0].message);
    let forces = app.world().get::<WheelForces>(wheels[2]).unwrap();
    assert!(forces.0.longitudinal.is_finite() && forces.0.lateral.is_finite());
}

#[test]
fn the_wheel_components_are_registered_for_reflection() {
    let app = create_app();
    let registry = app.world().resource::<bevy_ecs::reflect::AppTypeRegistry>().read();
    for name in ["WheelContact", "WheelForces", "DrivelineRate"] {
        let reg = registry.get_with_short_type_path(name).unwrap_or_else(|| panic!("{name} not registered"));
        assert!(reg.data::<bevy_ecs::reflect::ReflectComponent>().is_some(), "{name} lacks ReflectComponent");
    }
}

#[test]
fn a_contact_not_written_again_is_held_as_the_core_holds_it() {
    // A physics engine stepping every third fixed tick writes the contacts once per physics
    // step: the plugin takes a contact only when it was written, and steps as the core does
    // when `set_chassis_contact` is called once and the vehicle stepped three times.
    let spec = vehicle_spec("sedan_8hp.ron");
    let mut app = create_app();
    let root = spawn_vehicle(app.world_mut(), spec.clone(), Road::Chassis).unwrap();
    let mut car = Vehicle::new_chassis(spec.clone()).unwrap();
    let tick = Duration::from_millis(5);
    let dt = tick.as_secs_f64();
    let input = DriverInput { selector: Selector::Drive, throttle: 0.6, ..Default::default() };
    app.world_mut().get_mut::<VehicleInput>(root).unwrap().0 = input;
    let wheels = app.world().get::<VehicleParts>(root).unwrap().wheels.clone();
    for step in 0..90 {
        if step % 3 == 0 {
            let v = step as f64 * 0.02;
            for (k, c) in contacts(&spec, v).into_iter().enumerate() {
                *app.world_mut().get_mut::<WheelContact>(wheels[k]).unwrap() = WheelContact(c);
                car.set_chassis_contact(k, &c).unwrap();
            }
        }
        fixed_step(&mut app, tick);
        car.step(&input, dt).unwrap();
        for (k, &w) in wheels.iter().enumerate() {
            assert_eq!(
                *app.world().get::<WheelForces>(w).unwrap(),
                WheelForces(car.wheel_forces(k)),
                "step {step} wheel {k}"
            );
        }
    }
    assert!(car.telemetry().speed > 0.5, "the car did not move: {}", car.telemetry().speed);
}

//! Editing the parts of a moving car the way an inspector does: through reflection, by the
//! component's type name and the field's name, while the car drives at 60 Hz. Each edit takes
//! effect from the next step with the motion, the clock and the controllers kept; a bad value
//! is refused and the last valid one kept. Prints what each edit did.
//!
//! `cargo run --example inspector_tweaks`

use bevy_app::{App, FixedUpdate};
use bevy_ecs::message::Messages;
use bevy_ecs::name::Name;
use bevy_ecs::prelude::*;
use bevy_ecs::reflect::{AppTypeRegistry, ReflectComponent};
use bevy_reflect::GetPath;
use bevy_time::Time;
use driveline::bevy::prelude::*;
use driveline::bevy::{DrivelineCache, DrivelineRebuilt};
use driveline::core::DriverInput;
use driveline::core::vehicle::driver::first_to_third;
use driveline::core::vehicle::{Road, Telemetry, Vehicle};
use std::path::Path;
use std::time::Duration;

const FRAME: Duration = Duration::from_nanos(16_666_667);

fn tick(app: &mut App, frames: usize) {
    for _ in 0..frames {
        app.world_mut().resource_mut::<Time>().advance_by(FRAME);
        app.world_mut().run_schedule(FixedUpdate);
    }
}

fn telemetry(app: &App, root: Entity) -> Telemetry {
    app.world().get::<VehicleTelemetry>(root).expect("a vehicle").0
}

fn part(app: &mut App, root: Entity, name: &str) -> Entity {
    let parts = app.world().get::<DrivelineParts>(root).expect("a driveline").parts().to_vec();
    parts.into_iter().find(|&e| app.world().get::<Name>(e).is_some_and(|n| n.as_str() == name)).expect("a part")
}

/// Sets `field` of the component named `type_name` (its short type path) on `entity` to
/// `value`, through the type registry alone, as an inspector's text box would.
fn edit(app: &mut App, entity: Entity, type_name: &str, field: &str, value: f64) {
    let registry = app.world().resource::<AppTypeRegistry>().clone();
    let registry = registry.read();
    let registration = registry.get_with_short_type_path(type_name).expect("a registered component");
    let reflect = registration.data::<ReflectComponent>().expect("ReflectComponent");
    let mut entity = app.world_mut().entity_mut(entity);
    let mut component = reflect.reflect_mut(&mut entity).expect("the entity has it");
    *component.path_mut::<f64>(field).expect("an f64 field") = value;
}

fn line(label: &str, t: &Telemetry) {
    println!(
        "  {label:<34} t {:6.3} s  {:5.1} km/h  {:5.0} rpm  gear {}  clutch slip {:7.2} rad/s  accel {:5.2} m/s^2",
        t.time,
        t.speed * 3.6,
        t.engine_rpm,
        t.engaged_gear,
        t.clutch_slip,
        t.acceleration
    );
}

fn main() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/nissan_350z.ron");
    let spec = Vehicle::load(&path).unwrap_or_else(|e| panic!("{e}")).spec().clone();
    let mut app = App::new();
    app.add_plugins(DrivelinePlugins::default());
    let root = spawn_vehicle(app.world_mut(), spec, Road::Body).unwrap_or_else(|e| panic!("{e}"));

    // Away in first, up to third at a steady 40 % throttle.
    println!("== Nissan 350Z at 60 Hz: away in first, then third");
    let mut input = DriverInput::default();
    for k in 0..600 {
        input = first_to_third(k as f64 / 60.0, 0.4);
        app.world_mut().get_mut::<VehicleInput>(root).expect("a vehicle").0 = input;
        tick(&mut app, 1);
    }
    let generation = app.world().get::<DrivelineCache>(root).expect("a driveline").generation();
    line("cruising in third", &telemetry(&app, root));

    println!("\n== A shorter final drive (IdealGear `ratio` of final_drive_r x 1.25)");
    let fd = part(&mut app, root, "final_drive_r");
    let ratio = app.world().get::<IdealGear>(fd).expect("a gear").ratio;
    let before = telemetry(&app, root);
    edit(&mut app, fd, "IdealGear", "ratio", ratio * 1.25);
    tick(&mut app, 6);
    let after = telemetry(&app, root);
    line("before", &before);
    line("six frames after", &after);
    println!(
        "  engine speed over road speed: {:.1} -> {:.1} rpm per km/h (x {:.3}): the engine was pulled up to the new ratio",
        before.engine_rpm / (before.speed * 3.6),
        after.engine_rpm / (after.speed * 3.6),
        (after.engine_rpm / (after.speed * 3.6)) / (before.engine_rpm / (before.speed * 3.6))
    );

    println!("\n== A tired clutch (Clutch `fn_max` x 0.02) at full throttle");
    let clutch = app.world().get::<VehicleParts>(root).expect("a vehicle").clutch.expect("a manual");
    input.throttle = 1.0;
    app.world_mut().get_mut::<VehicleInput>(root).expect("a vehicle").0 = input;
    tick(&mut app, 30);
    let before = telemetry(&app, root);
    let fn_max = app.world().get::<Clutch>(clutch).expect("a clutch").fn_max;
    edit(&mut app, clutch, "Clutch", "fn_max", fn_max * 0.02);
    tick(&mut app, 30);
    line("before", &before);
    line("half a second after", &telemetry(&app, root));

    println!("\n== A heavier car (Mass `m` x 2), the clutch restored");
    edit(&mut app, clutch, "Clutch", "fn_max", fn_max);
    tick(&mut app, 30);
    let body = app.world().get::<VehicleParts>(root).expect("a vehicle").body.expect("a body");
    let m = app.world().get::<driveline::bevy::parts::Mass>(body).expect("a mass").m;
    let before = telemetry(&app, root);
    edit(&mut app, body, "Mass", "m", 2.0 * m);
    tick(&mut app, 30);
    line("before", &before);
    line("half a second after", &telemetry(&app, root));

    println!("\n== A bad value: the engine's inertia set to NaN");
    let engine = app.world().get::<VehicleParts>(root).expect("a vehicle").engine;
    let j = app.world().get::<Inertia>(engine).expect("an inertia").j;
    edit(&mut app, engine, "Inertia", "j", f64::NAN);
    tick(&mut app, 1);
    for m in app.world_mut().resource_mut::<Messages<DrivelineEditRefused>>().drain() {
        println!("  refused: {}", m.message);
    }
    let kept = app.world().get::<Inertia>(engine).expect("an inertia").j;
    println!("  the engine's inertia is {kept} kg m^2 again (was {j})");
    line("and the car drives on", &telemetry(&app, root));

    let rebuilt = app.world_mut().resource_mut::<Messages<DrivelineRebuilt>>().drain().count();
    let now = app.world().get::<DrivelineCache>(root).expect("a driveline").generation();
    println!(
        "\nNetwork rebuilds through all of it: {} (generation {generation} -> {now}); every edit applied in place.",
        rebuilt
    );
    assert_eq!(kept, j);
    assert_eq!(now, generation);
}

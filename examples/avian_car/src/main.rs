//! # The Driveline avian car
//!
//! The example car's driveline under a rigid-body chassis simulated by avian3d: four suspension
//! rays with springs and dampers, steering, a terrain with a 20 % slope, a kicker ramp and an
//! icy patch, the gamepad and keyboard and HUD of the example car, a chase camera.
//!
//! The vehicle is spawned on `Road::Chassis`: each fixed step this program writes every wheel's
//! `WheelContact` from the ray casts (in `DrivelineSystems::Input`), the plugin steps the
//! driveline, and it applies every wheel's `WheelForces` with the suspension force at the
//! contact point (after `DrivelineSystems::Solve`), before avian's step in `FixedPostUpdate`.
//! The scheme, and why it holds a parked car on a slope without creep at a game's step, is in
//! `driveline_core::vehicle::chassis`.
//!
//! ```text
//! cargo run -p driveline_avian_car --release -- --car auto --hz 60
//! # Headless under Xvfb with software rendering (Mesa llvmpipe):
//! bash scripts/car.sh --avian --headless --car auto --hz 60 --autopilot --screenshot avian.png --frames 150
//! ```
//!
//! Keys: those of the example car; Left / Right (and the gamepad's left stick) steer.

mod tour;
mod world;

use avian3d::prelude::*;
use bevy::math::{DQuat, DVec3};
use bevy::prelude::*;
use bevy_driveline::DrivelineSystems;
use bevy_driveline::chassis::{WheelContact, WheelForces};
use bevy_driveline::vehicle::{VehicleParts, VehicleTelemetry};
use clap::Parser;
use driveline_car::controls::{Keyboard, PadState};
use driveline_car::{Args, Car, Phase, app, scene::spawn_model};
use driveline_core::vehicle::{Road, VehicleSpec, WheelContact as ContactData};
use driveline_gamepad::Action;

/// Standard gravity, m/s^2.
pub const G: f64 = 9.80665;

fn main() -> AppExit {
    let Some(mut app) = app(Args::parse(), "Driveline: avian car", Road::Chassis) else { return AppExit::error() };
    app.add_plugins(PhysicsPlugins::default())
        .insert_resource(Gravity(avian3d::math::Vector::NEG_Y * G))
        .init_resource::<Steering>()
        .add_plugins((world::WorldPlugin, tour::TourPlugin))
        .add_systems(OnEnter(Phase::Driving), spawn_chassis)
        .add_systems(
            FixedUpdate,
            (steer.run_if(|args: Res<Args>| !args.autopilot), write_contacts).chain().in_set(DrivelineSystems::Input),
        )
        .add_systems(FixedUpdate, apply_forces.after(DrivelineSystems::Solve))
        .add_systems(Update, (place_wheels, follow_camera).chain().run_if(in_state(Phase::Driving)));
    app.run()
}

/// The rigid body's suspension and what its rays found this step. Geometry in the body's
/// frame: Y up, the car facing -Z, the origin at the centre of mass.
#[derive(Component)]
pub struct Chassis {
    /// Strut tops (front left, front right, rear left, rear right), m.
    mounts: [Vec3; 4],
    /// Spring length at rest, m; wheel radius, m.
    rest: f64,
    radius: f64,
    /// Spring rate, N/m, and damping, N s/m, per corner.
    k: f64,
    c: f64,
    /// The body's mass, kg, and principal moments of inertia in its frame, kg m^2.
    mass: f64,
    inertia: DVec3,
    /// This step's ray hits.
    pub hits: [Option<Hit>; 4],
    /// Wheel spin angles for the picture, rad.
    spin: [f64; 4],
}

/// A wheel's ray hit: where, the ground's normal, the wheel's heading and left on the ground,
/// the suspension's force along the normal, the distance from the strut top.
#[derive(Clone, Copy)]
pub struct Hit {
    point: DVec3,
    normal: DVec3,
    heading: DVec3,
    left: DVec3,
    load: f64,
    distance: f64,
}

/// The friction of a surface relative to a dry road (the icy patch has one).
#[derive(Component, Clone, Copy)]
pub struct SurfaceFriction(pub f64);

/// The front wheels' steering angle, rad (left positive).
#[derive(Resource, Default)]
pub struct Steering(pub f64);

/// A wheel's picture: which wheel.
#[derive(Component)]
struct WheelPicture(usize);

/// The chase camera's target.
#[derive(Component)]
struct CarModel;

/// The strut geometry of `spec`: mounts 0.1 m below the centre of mass, 0.85 m either side.
fn mounts(spec: &VehicleSpec) -> [Vec3; 4] {
    let b = &spec.body;
    let front = -(b.wheelbase * (1.0 - b.front_weight)) as f32;
    let rear = (b.wheelbase * b.front_weight) as f32;
    [
        Vec3::new(-0.85, -0.1, front),
        Vec3::new(0.85, -0.1, front),
        Vec3::new(-0.85, -0.1, rear),
        Vec3::new(0.85, -0.1, rear),
    ]
}

/// The chassis: a box of the car's mass and inertia at its static ride height, the picture
/// of the example car on it.
fn spawn_chassis(
    mut commands: Commands,
    car: Option<Res<Car>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    let Some(car) = car else { return };
    let b = &car.spec.body;
    let (m, radius) = (b.mass, car.spec.wheels.radius);
    // About 1.5 Hz per corner, 30 % of critical damping.
    let k = 0.25 * m * (std::f64::consts::TAU * 1.5).powi(2);
    let c = 2.0 * 0.3 * (k * 0.25 * m).sqrt();
    let rest = 0.35;
    let x0 = 0.5 * b.front_weight * m * G / k;
    let height = 0.1 + rest + radius - x0;
    let (l, w, h) = (4.4f32, 1.66f32, 0.9f32);
    let mass = m as f32;
    let inertia =
        Vec3::new(mass * (h * h + l * l) / 12.0, mass * (w * w + l * l) / 12.0, mass * (w * w + h * h) / 12.0);
    let chassis = commands
        .spawn((
            Chassis {
                mounts: mounts(&car.spec),
                rest,
                radius,
                k,
                c,
                mass: m,
                inertia: inertia.as_dvec3(),
                hits: [None; 4],
                spin: [0.0; 4],
            },
            RigidBody::Dynamic,
            Collider::cuboid(f64::from(w), 0.5, f64::from(l)),
            (Mass(mass), AngularInertia::new(inertia), CenterOfMass(Vec3::ZERO)),
            (NoAutoMass, NoAutoAngularInertia, NoAutoCenterOfMass),
            SleepingDisabled,
            TransformInterpolation,
            Transform::from_xyz(0.0, height as f32 + 0.02, 0.0),
            Visibility::default(),
        ))
        .id();
    let (model, wheels) = spawn_model(&mut commands, &mut meshes, &mut materials, car.choice.color(), radius as f32);
    commands.entity(model).insert((CarModel, Transform::from_xyz(0.0, -height as f32, 0.0), ChildOf(chassis)));
    for (index, wheel) in wheels.into_iter().enumerate() {
        commands.entity(wheel).insert(WheelPicture(index));
    }
}

/// Steering from the keyboard (ramped) or the gamepad's stick, less at speed.
fn steer(
    time: Res<Time>,
    kb: Res<Keyboard>,
    pad: Res<PadState>,
    car: Option<Res<Car>>,
    tel: Query<&VehicleTelemetry>,
    mut steering: ResMut<Steering>,
) {
    let speed = car.and_then(|c| tel.get(c.root).ok()).map_or(0.0, |t| t.0.speed.abs());
    let stick = pad.actions.analog(Action::Steering);
    // Right on the stick or key steers right: a negative angle.
    let target = -(if stick.abs() > kb.steering.abs() { stick } else { kb.steering }) * 0.55 / (1.0 + speed / 12.0);
    let rate = 1.5 * time.delta_secs_f64();
    steering.0 += (target - steering.0).clamp(-rate, rate);
}

/// `Input`: casts the four suspension rays and writes each wheel's contact for the driveline.
fn write_contacts(
    car: Option<Res<Car>>,
    steering: Res<Steering>,
    spatial: SpatialQuery,
    surfaces: Query<&SurfaceFriction>,
    mut chassis: Query<(Entity, &mut Chassis, &Position, &Rotation, &LinearVelocity, &AngularVelocity)>,
    parts: Query<&VehicleParts>,
    mut contacts: Query<&mut WheelContact>,
) {
    let Some(car) = car else { return };
    let Ok(parts) = parts.get(car.root) else { return };
    let gravity = DVec3::NEG_Y * G;
    for (entity, mut ch, pos, rot, v, w) in &mut chassis {
        let filter = SpatialQueryFilter::from_excluded_entities([entity]);
        let down = rot.0 * DVec3::NEG_Y;
        let reach = ch.rest + ch.radius;
        for k in 0..4 {
            let origin = pos.0 + rot.0 * ch.mounts[k].as_dvec3();
            let velocity = |p: DVec3| v.0 + w.0.cross(p - pos.0);
            let hit = Dir3::new(down.as_vec3())
                .ok()
                .and_then(|dir| spatial.cast_ray(origin, dir, reach, true, &filter))
                .map(|h| {
                    let point = origin + down * h.distance;
                    let normal = h.normal.normalize_or(DVec3::Y);
                    let compression = reach - h.distance;
                    let rate = velocity(origin).dot(down);
                    let load = (ch.k * compression + ch.c * rate).max(0.0);
                    let angle = if k < 2 { steering.0 } else { 0.0 };
                    let forward = rot.0 * DQuat::from_rotation_y(angle) * DVec3::NEG_Z;
                    let heading = (forward - normal * normal.dot(forward)).normalize_or(forward);
                    let left = normal.cross(heading);
                    let friction = surfaces.get(h.entity).map_or(1.0, |s| s.0);
                    (Hit { point, normal, heading, left, load, distance: h.distance }, friction)
                });
            let contact = match hit {
                Some((h, friction)) => {
                    let vp = velocity(h.point);
                    ContactData {
                        in_contact: true,
                        load: h.load,
                        speed_along: vp.dot(h.heading),
                        speed_across: vp.dot(h.left),
                        friction,
                        accel_along: gravity.dot(h.heading),
                        accel_across: gravity.dot(h.left),
                        mass_across: effective_mass(&ch, rot.0, h.point - pos.0, h.left),
                    }
                }
                None => ContactData {
                    in_contact: false,
                    load: 0.0,
                    speed_along: velocity(origin).dot(rot.0 * DVec3::NEG_Z),
                    ..Default::default()
                },
            };
            ch.hits[k] = hit.map(|(h, _)| h);
            if let Some(&wheel) = parts.wheels.get(k)
                && let Ok(mut c) = contacts.get_mut(wheel)
            {
                c.0 = contact;
            }
        }
    }
}

/// The body's effective mass at `r` (from its centre of mass, world frame) along the unit
/// vector `dir`: `1 / (1/m + (r x d) . I^-1 (r x d))`, with the inertia turned into the world
/// by `rot`.
fn effective_mass(ch: &Chassis, rot: DQuat, r: DVec3, dir: DVec3) -> f64 {
    let local = rot.inverse() * r.cross(dir);
    let turn = local.x * local.x / ch.inertia.x + local.y * local.y / ch.inertia.y + local.z * local.z / ch.inertia.z;
    1.0 / (1.0 / ch.mass + turn)
}

/// After `Solve`: the suspension and tyre forces at each contact point, for avian's step.
fn apply_forces(
    car: Option<Res<Car>>,
    parts: Query<&VehicleParts>,
    forces: Query<&WheelForces>,
    mut chassis: Query<(Forces, &mut Chassis)>,
    time: Res<Time>,
) {
    let Some(car) = car else { return };
    let Ok(parts) = parts.get(car.root) else { return };
    for (mut body, mut ch) in &mut chassis {
        for k in 0..4 {
            let Some(f) = parts.wheels.get(k).and_then(|&w| forces.get(w).ok()) else { continue };
            ch.spin[k] = (ch.spin[k] + f.0.spin * time.delta_secs_f64()) % std::f64::consts::TAU;
            let Some(h) = ch.hits[k] else { continue };
            let force = h.normal * h.load + h.heading * f.0.longitudinal + h.left * f.0.lateral;
            body.apply_force_at_point(force, h.point);
        }
    }
}

/// Puts each wheel's picture on its strut (at the ray's hit, or hanging at full droop), steered
/// and spinning.
fn place_wheels(
    steering: Res<Steering>,
    chassis: Query<(&Chassis, &Children)>,
    models: Query<&Transform, (With<CarModel>, Without<WheelPicture>)>,
    mut wheels: Query<(&WheelPicture, &mut Transform)>,
) {
    for (ch, children) in &chassis {
        let Some(offset) = children.iter().find_map(|c| models.get(c).ok()).map(|t| t.translation) else { continue };
        for (picture, mut t) in &mut wheels {
            let k = picture.0;
            let travel = ch.hits[k].map_or(ch.rest, |h| h.distance - ch.radius);
            let centre = ch.mounts[k] + Vec3::NEG_Y * travel as f32 - offset;
            let angle = if k < 2 { steering.0 as f32 } else { 0.0 };
            t.translation = centre;
            t.rotation = Quat::from_rotation_y(angle) * Quat::from_rotation_x(-(ch.spin[k] as f32));
        }
    }
}

/// A camera behind and above the car, looking ahead of it.
fn follow_camera(
    chassis: Query<&Transform, (With<Chassis>, Without<Camera3d>)>,
    mut camera: Query<&mut Transform, With<Camera3d>>,
) {
    let (Ok(car), Ok(mut cam)) = (chassis.single(), camera.single_mut()) else { return };
    let yaw = Quat::from_rotation_y(car.rotation.to_euler(EulerRot::YXZ).0);
    let eye = car.translation + yaw * Vec3::new(-1.5, 2.4, 8.5);
    let target = car.translation + yaw * Vec3::new(0.0, 0.6, -5.0);
    *cam = Transform::from_translation(eye).looking_at(target, Vec3::Y);
}

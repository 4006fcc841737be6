//! The world: an endless straight road with lane markings and posts, the car (body, cabin, four
//! wheels turning at the simulated wheel speeds), a chase camera. The car moves along -Z by the
//! simulated distance; the driveline is longitudinal, so the lane keys only slide the car across.

use crate::controls::Keyboard;
use crate::{Car, Phase};
use bevy::prelude::*;
use bevy_driveline::vehicle::VehicleTelemetry;

/// Spawns the scene once the car is chosen and moves it every frame.
pub struct ScenePlugin;

impl Plugin for ScenePlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(Startup, setup_world)
            .add_systems(OnEnter(Phase::Driving), spawn_car)
            .add_systems(Update, (move_car, scroll_road, follow_camera).chain().run_if(in_state(Phase::Driving)));
    }
}

/// Spacing of the lane dashes, m.
const DASH_SPACING: f32 = 9.0;
/// Number of dashes (they are recycled as the car moves).
const DASHES: usize = 24;
/// Spacing of the roadside posts, m.
const POST_SPACING: f32 = 25.0;
/// Number of posts per side.
const POSTS: usize = 10;
/// Lane centres, m.
const LANES: [f32; 2] = [-1.9, 1.9];

/// The car's body (moved by the simulated distance).
#[derive(Component)]
struct CarBody;

/// A wheel: which of the four (fl, fr, rl, rr) and its spin angle, rad.
#[derive(Component)]
struct Wheel {
    index: usize,
    angle: f64,
}

/// A recycled road item at `slot` along the road, `spacing` apart.
#[derive(Component)]
struct Recycled {
    slot: usize,
    spacing: f32,
    count: usize,
}

/// Lateral position of the car, m.
#[derive(Resource)]
struct Lateral(f32);

/// The chase camera.
#[derive(Component)]
struct ChaseCamera;

/// A non-metallic material of `color` and `roughness` (0 polished .. 1 chalky).
pub fn matte(color: Color, roughness: f32) -> StandardMaterial {
    StandardMaterial { base_color: color, perceptual_roughness: roughness, ..default() }
}

fn setup_world(
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    commands.insert_resource(GlobalAmbientLight { brightness: 400.0, ..default() });
    commands.spawn((
        DirectionalLight { illuminance: 9_000.0, shadow_maps_enabled: false, ..default() },
        Transform::from_xyz(-30.0, 60.0, 20.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    commands.spawn((Camera3d::default(), ChaseCamera, Transform::from_xyz(0.0, 3.0, 9.0)));
    // Grass and road follow the car (they are uniform); markings and posts are recycled.
    let grass = materials.add(matte(Color::srgb(0.28, 0.45, 0.2), 1.0));
    let asphalt = materials.add(matte(Color::srgb(0.16, 0.16, 0.17), 0.9));
    let paint = materials.add(StandardMaterial { base_color: Color::srgb(0.95, 0.95, 0.9), ..default() });
    let post = materials.add(StandardMaterial { base_color: Color::srgb(0.9, 0.9, 0.9), ..default() });
    let reflector = materials.add(StandardMaterial { base_color: Color::srgb(0.9, 0.2, 0.1), ..default() });
    commands.spawn((
        Mesh3d(meshes.add(Plane3d::default().mesh().size(400.0, 600.0))),
        MeshMaterial3d(grass),
        Transform::from_xyz(0.0, -0.01, 0.0),
        Recycled { slot: 0, spacing: 0.0, count: 1 },
    ));
    commands.spawn((
        Mesh3d(meshes.add(Plane3d::default().mesh().size(8.4, 600.0))),
        MeshMaterial3d(asphalt),
        Transform::default(),
        Recycled { slot: 0, spacing: 0.0, count: 1 },
    ));
    let dash = meshes.add(Cuboid::new(0.15, 0.01, 3.0));
    let edge = meshes.add(Cuboid::new(0.15, 0.01, DASH_SPACING));
    for slot in 0..DASHES {
        let r = Recycled { slot, spacing: DASH_SPACING, count: DASHES };
        commands.spawn((Mesh3d(dash.clone()), MeshMaterial3d(paint.clone()), Transform::default(), r));
        for x in [-4.0, 4.0] {
            let r = Recycled { slot, spacing: DASH_SPACING, count: DASHES };
            commands.spawn((Mesh3d(edge.clone()), MeshMaterial3d(paint.clone()), Transform::from_xyz(x, 0.0, 0.0), r));
        }
    }
    let pole = meshes.add(Cuboid::new(0.12, 1.0, 0.12));
    let cap = meshes.add(Cuboid::new(0.13, 0.12, 0.13));
    for slot in 0..POSTS {
        for x in [-5.5f32, 5.5] {
            let r = Recycled { slot, spacing: POST_SPACING, count: POSTS };
            commands
                .spawn((Mesh3d(pole.clone()), MeshMaterial3d(post.clone()), Transform::from_xyz(x, 0.5, 0.0), r))
                .with_child((
                    Mesh3d(cap.clone()),
                    MeshMaterial3d(reflector.clone()),
                    Transform::from_xyz(0.0, 0.35, 0.0),
                ));
        }
    }
    commands.insert_resource(Lateral(LANES[1]));
}

fn spawn_car(
    mut commands: Commands,
    car: Option<Res<Car>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
) {
    let (color, radius) = match &car {
        Some(c) => (c.choice.color(), c.spec.wheels.radius as f32),
        None => (Color::WHITE, 0.32),
    };
    let (body, wheels) = spawn_model(&mut commands, &mut meshes, &mut materials, color, radius);
    commands.entity(body).insert((CarBody, Transform::from_xyz(LANES[1], 0.0, 0.0)));
    for (index, wheel) in wheels.into_iter().enumerate() {
        commands.entity(wheel).insert(Wheel { index, angle: 0.0 });
    }
}

/// The car's model: a body (paint, glass, roof, tail lights) whose origin is on the ground
/// under its centre, facing -Z, and four wheels (fl, fr, rl, rr) as its children, each a tyre
/// and a rim about the wheel's centre. Returns the body and the wheels; the caller places them.
pub fn spawn_model(
    commands: &mut Commands,
    meshes: &mut Assets<Mesh>,
    materials: &mut Assets<StandardMaterial>,
    color: Color,
    radius: f32,
) -> (Entity, [Entity; 4]) {
    let paint =
        materials.add(StandardMaterial { base_color: color, metallic: 0.3, perceptual_roughness: 0.4, ..default() });
    let glass = materials.add(matte(Color::srgb(0.1, 0.12, 0.16), 0.1));
    let tyre = materials.add(matte(Color::srgb(0.05, 0.05, 0.05), 0.95));
    let rim = materials.add(StandardMaterial { base_color: Color::srgb(0.75, 0.75, 0.78), metallic: 0.8, ..default() });
    let lights = materials.add(StandardMaterial {
        base_color: Color::srgb(0.8, 0.05, 0.05),
        emissive: LinearRgba::rgb(2.0, 0.0, 0.0),
        ..default()
    });
    let body = commands
        .spawn((Transform::default(), Visibility::default()))
        .with_children(|c| {
            c.spawn((
                Mesh3d(meshes.add(Cuboid::new(1.66, 0.55, 4.4))),
                MeshMaterial3d(paint.clone()),
                Transform::from_xyz(0.0, radius + 0.3, 0.0),
            ));
            c.spawn((
                Mesh3d(meshes.add(Cuboid::new(1.5, 0.5, 2.2))),
                MeshMaterial3d(glass),
                Transform::from_xyz(0.0, radius + 0.8, 0.3),
            ));
            c.spawn((
                Mesh3d(meshes.add(Cuboid::new(1.52, 0.08, 2.0))),
                MeshMaterial3d(paint),
                Transform::from_xyz(0.0, radius + 1.07, 0.3),
            ));
            for x in [-0.65, 0.65] {
                c.spawn((
                    Mesh3d(meshes.add(Cuboid::new(0.35, 0.12, 0.05))),
                    MeshMaterial3d(lights.clone()),
                    Transform::from_xyz(x, radius + 0.4, 2.21),
                ));
            }
        })
        .id();
    let tyre_mesh = meshes.add(Cylinder::new(radius, 0.24));
    let rim_mesh = meshes.add(Cuboid::new(0.26, radius * 1.2, 0.12));
    // fl, fr, rl, rr; the car faces -Z.
    let places = [(-0.9, -1.35), (0.9, -1.35), (-0.9, 1.35), (0.9, 1.35)];
    let wheels = places.map(|(x, z)| {
        let wheel = commands.spawn((Transform::from_xyz(x, radius, z), Visibility::default(), ChildOf(body))).id();
        // The cylinder's axis is Y: turned onto the axle (X).
        commands.spawn((
            Mesh3d(tyre_mesh.clone()),
            MeshMaterial3d(tyre.clone()),
            Transform::from_rotation(Quat::from_rotation_z(std::f32::consts::FRAC_PI_2)),
            ChildOf(wheel),
        ));
        commands.spawn((Mesh3d(rim_mesh.clone()), MeshMaterial3d(rim.clone()), Transform::default(), ChildOf(wheel)));
        wheel
    });
    (body, wheels)
}

/// Places the car at the simulated distance and turns its wheels.
fn move_car(
    time: Res<Time>,
    car: Option<Res<Car>>,
    kb: Res<Keyboard>,
    mut lateral: ResMut<Lateral>,
    tel: Query<&VehicleTelemetry>,
    mut body: Query<&mut Transform, (With<CarBody>, Without<Wheel>)>,
    mut wheels: Query<(&mut Wheel, &mut Transform)>,
) {
    let Some(car) = car else { return };
    let Ok(tel) = tel.get(car.root) else { return };
    let dt = time.delta_secs();
    // Lane change at up to 2 m/s, and only while moving.
    let lane_speed = (tel.0.speed.abs() as f32 * 0.15).min(2.0);
    lateral.0 = (lateral.0 + kb.steering as f32 * lane_speed * dt).clamp(LANES[0] - 1.0, LANES[1] + 1.0);
    for mut t in &mut body {
        t.translation = Vec3::new(lateral.0, 0.0, -(tel.0.distance as f32));
    }
    for (mut w, mut t) in &mut wheels {
        // Angle from the wheel speed over the frame (the sim runs at its fixed rate in between).
        w.angle = (w.angle + tel.0.wheel_speed[w.index] * f64::from(dt)) % std::f64::consts::TAU;
        // Forward motion (-Z) turns the wheel about +X by a negative angle.
        t.rotation = Quat::from_rotation_x(-(w.angle as f32));
    }
}

/// Moves the recycled road items so that they always surround the car.
fn scroll_road(
    body: Query<&Transform, (With<CarBody>, Without<Recycled>)>,
    mut items: Query<(&Recycled, &mut Transform)>,
) {
    let Ok(car) = body.single() else { return };
    let z = car.translation.z;
    for (r, mut t) in &mut items {
        if r.spacing == 0.0 {
            t.translation.z = z - 150.0;
            continue;
        }
        // Item `slot` sits at the first multiple k of the spacing at or after z - 0.75 span
        // with k = slot (mod count): the items cover mostly the road ahead (-Z) of the car.
        let span = r.spacing * r.count as f32;
        let k0 = ((z - 0.75 * span) / r.spacing).ceil() as i64;
        let k = k0 + (r.slot as i64 - k0).rem_euclid(r.count as i64);
        t.translation.z = k as f32 * r.spacing;
    }
}

fn follow_camera(
    body: Query<&Transform, (With<CarBody>, Without<ChaseCamera>)>,
    mut camera: Query<&mut Transform, With<ChaseCamera>>,
) {
    let (Ok(car), Ok(mut cam)) = (body.single(), camera.single_mut()) else { return };
    let target = car.translation + Vec3::new(0.0, 0.9, -5.0);
    let eye = car.translation + Vec3::new(-1.2, 2.6, 8.0);
    *cam = Transform::from_translation(eye).looking_at(target, Vec3::Y);
}

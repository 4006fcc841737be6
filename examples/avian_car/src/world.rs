//! The terrain: a large flat ground, an icy patch, a kicker ramp and a 20 % slope up to a wide
//! plateau, all static avian colliders with their pictures; the light and the camera.

use crate::SurfaceFriction;
use avian3d::prelude::*;
use bevy::prelude::*;
use driveline_car::scene::matte;

/// Spawns the terrain at start-up.
pub struct WorldPlugin;

impl Plugin for WorldPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(Startup, setup);
    }
}

/// The icy patch's friction relative to a dry road.
const ICE: f64 = 0.15;
/// The slope's grade.
const GRADE: f32 = 0.2;

/// A static box of `size` (full lengths, m) at `at`, turned by `rotation`, drawn in `material`.
fn block(
    commands: &mut Commands,
    meshes: &mut Assets<Mesh>,
    material: &Handle<StandardMaterial>,
    size: Vec3,
    at: Vec3,
    rotation: Quat,
) -> Entity {
    commands
        .spawn((
            RigidBody::Static,
            Collider::cuboid(f64::from(size.x), f64::from(size.y), f64::from(size.z)),
            Mesh3d(meshes.add(Cuboid::new(size.x, size.y, size.z))),
            MeshMaterial3d(material.clone()),
            Transform::from_translation(at).with_rotation(rotation),
        ))
        .id()
}

fn setup(mut commands: Commands, mut meshes: ResMut<Assets<Mesh>>, mut materials: ResMut<Assets<StandardMaterial>>) {
    commands.insert_resource(GlobalAmbientLight { brightness: 400.0, ..default() });
    commands.spawn((
        DirectionalLight { illuminance: 9_000.0, shadow_maps_enabled: false, ..default() },
        Transform::from_xyz(-30.0, 60.0, 20.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    commands.spawn((Camera3d::default(), Transform::from_xyz(0.0, 3.0, 9.0)));
    let grass = materials.add(matte(Color::srgb(0.28, 0.45, 0.2), 1.0));
    let asphalt = materials.add(matte(Color::srgb(0.2, 0.2, 0.21), 0.9));
    let ice = materials.add(StandardMaterial {
        base_color: Color::srgb(0.78, 0.88, 0.97),
        perceptual_roughness: 0.15,
        ..default()
    });
    let ramp = materials.add(matte(Color::srgb(0.75, 0.55, 0.2), 0.8));
    let hill = materials.add(matte(Color::srgb(0.45, 0.42, 0.38), 0.9));
    // The ground: its top at y = 0.
    block(&mut commands, &mut meshes, &grass, Vec3::new(400.0, 1.0, 400.0), Vec3::new(0.0, -0.5, 0.0), Quat::IDENTITY);
    // A road ahead of the start (-Z), drawn only.
    commands.spawn((
        Mesh3d(meshes.add(Plane3d::default().mesh().size(8.0, 300.0))),
        MeshMaterial3d(asphalt),
        Transform::from_xyz(0.0, 0.005, -140.0),
    ));
    // The icy patch: 2 cm proud of the ground, 14 m long.
    let patch =
        block(&mut commands, &mut meshes, &ice, Vec3::new(8.0, 0.04, 14.0), Vec3::new(0.0, 0.0, -22.0), Quat::IDENTITY);
    commands.entity(patch).insert(SurfaceFriction(ICE));
    // The kicker: 8 m at 12 %, its top edge at z = -58.
    let angle = 0.12f32.atan();
    let length = 8.0 / angle.cos();
    let tilt = Quat::from_rotation_x(angle);
    let centre = Vec3::new(0.0, 0.48 - 0.25 * angle.cos(), -54.0);
    block(&mut commands, &mut meshes, &ramp, Vec3::new(6.0, 0.5, length), centre, tilt);
    // The slope: 40 m at 20 % to a plateau 8 m up.
    let angle = GRADE.atan();
    let length = 40.0 / angle.cos();
    let tilt = Quat::from_rotation_x(angle);
    let centre = Vec3::new(0.0, 4.0 - 1.0 * angle.cos(), -140.0);
    block(&mut commands, &mut meshes, &hill, Vec3::new(20.0, 2.0, length), centre, tilt);
    block(&mut commands, &mut meshes, &hill, Vec3::new(80.0, 2.0, 80.0), Vec3::new(0.0, 7.0, -200.0), Quat::IDENTITY);
}

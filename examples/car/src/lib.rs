//! # The Driveline example car (its library: shared with `examples/avian_car`)
//!
//! A car on a road, driven with a gamepad or the keyboard: the Nissan 350Z with its H-pattern
//! manual and clutch pedal, the sequential race car, or the 8HP automatic sedan. The whole
//! driveline (engine map, clutch or torque converter, dogs and shift linkages or planetary sets
//! and their shift elements, differential, tyres, body) is the `bevy_driveline` plugin stepping
//! at a fixed rate (1 kHz by default) inside Bevy's `FixedUpdate`; this program only samples the
//! devices, draws the scene and shows the HUD.
//!
//! ```text
//! cargo run -p driveline_car --release                     # choose the car at start
//! cargo run -p driveline_car --release -- --car auto       # straight into the 8HP sedan
//! # Headless check under Xvfb with software rendering (Mesa llvmpipe):
//! xvfb-run -s "-screen 0 1280x720x24" cargo run -p driveline_car --release -- \
//!     --car auto --autopilot --screenshot car.png --frames 150
//! ```
//!
//! Keys: see [`controls`]. With `--screenshot`, every frame advances the simulation by a fixed
//! 40 ms whatever the renderer's speed, so the picture is the same on any machine.

pub mod controls;
pub mod hud;
pub mod scene;

use bevy::app::ScheduleRunnerPlugin;
use bevy::prelude::*;
use bevy::render::RenderPlugin;
use bevy::render::settings::WgpuSettings;
use bevy::render::view::screenshot::{Screenshot, ScreenshotCaptured, save_to_disk};
use bevy::time::TimeUpdateStrategy;
use bevy::window::ExitCondition;
use bevy::winit::WinitPlugin;
use bevy_driveline::prelude::*;
use bevy_driveline::vehicle::{DrivelineRate, spawn_vehicle};
use clap::{Parser, ValueEnum};
use driveline_core::vehicle::{Road, Vehicle, VehicleSpec};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The shipped vehicles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CarChoice {
    /// Nissan 350Z: 6-speed H-pattern manual with a clutch pedal.
    Manual,
    /// Race car: sequential dog box with paddle shifts and ignition cut.
    Race,
    /// BMW-class sedan: ZF 8HP70 planetary automatic with torque converter.
    Auto,
    /// Medium truck (12 t): Detroit Diesel Series 50, 6-speed manual with a clutch pedal.
    Truck,
}

impl CarChoice {
    /// The vehicle file under `assets/vehicles`.
    pub fn file(self) -> &'static str {
        match self {
            CarChoice::Manual => "nissan_350z.ron",
            CarChoice::Race => "race_sequential.ron",
            CarChoice::Auto => "sedan_8hp.ron",
            CarChoice::Truck => "diesel_truck.ron",
        }
    }
    /// The name shown in the menu and the HUD.
    pub fn label(self) -> &'static str {
        match self {
            CarChoice::Manual => "Nissan 350Z, 6-speed manual",
            CarChoice::Race => "Race car, sequential dog box",
            CarChoice::Auto => "Sedan, ZF 8HP70 automatic",
            CarChoice::Truck => "Diesel truck, 6-speed manual",
        }
    }
    /// The body's paint.
    pub fn color(self) -> Color {
        match self {
            CarChoice::Manual => Color::srgb(0.75, 0.08, 0.06),
            CarChoice::Race => Color::srgb(0.05, 0.25, 0.75),
            CarChoice::Auto => Color::srgb(0.62, 0.64, 0.66),
            CarChoice::Truck => Color::srgb(0.85, 0.62, 0.10),
        }
    }
}

/// Command line.
#[derive(Parser, Debug, Resource, Clone)]
#[command(about = "Drive a Driveline vehicle on a road (gamepad or keyboard).")]
pub struct Args {
    /// The car; without it a menu asks.
    #[arg(long, value_enum)]
    pub car: Option<CarChoice>,
    /// Fixed simulation rate, Hz.
    #[arg(long, default_value_t = 1000.0)]
    pub hz: f64,
    /// The driveline's own rate inside each fixed step, Hz (`DrivelineRate`): 1000 steps the
    /// driveline at 1 kHz inside a 60 Hz game step. Without it, once per fixed step.
    #[arg(long)]
    pub driveline_hz: Option<f64>,
    /// Gamepad bindings file (RON); default: the Xbox-style layout.
    #[arg(long)]
    pub bindings: Option<PathBuf>,
    /// A scripted driver instead of the devices (for demos and the screenshot check).
    #[arg(long)]
    pub autopilot: bool,
    /// Render `--frames` frames, save a screenshot to this PNG file and exit.
    #[arg(long)]
    pub screenshot: Option<PathBuf>,
    /// Frames to render before the screenshot.
    #[arg(long, default_value_t = 150)]
    pub frames: u32,
    /// Run without a window or renderer: this many seconds of simulated time, one fixed step
    /// per update as fast as they go, then exit (with `--autopilot`, what it measured is logged).
    #[arg(long)]
    pub simulate: Option<f64>,
}

/// Menu, then driving.
#[derive(States, Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Phase {
    /// Choosing the car.
    #[default]
    Menu,
    /// On the road.
    Driving,
}

/// The car being driven: its root entity and its description.
#[derive(Resource)]
pub struct Car {
    /// The vehicle's driveline root.
    pub root: Entity,
    /// Which car.
    pub choice: CarChoice,
    /// Its description (gearbox resolved).
    pub spec: VehicleSpec,
}

/// What the car's tyres run on: its own longitudinal body (the example car) or a game's
/// rigid-body chassis (the avian car).
#[derive(Resource, Clone, Copy)]
pub struct CarRoad(pub Road);

/// The app both examples share: the window, the driveline plugins at `--hz`, the menu, the
/// controls and the HUD, the `--screenshot` capture. The caller adds its scene. `None` (after
/// a message) for a bad `--hz`.
pub fn app(args: Args, title: &str, road: Road) -> Option<App> {
    if !(args.hz.is_finite() && (10.0..=20_000.0).contains(&args.hz)) {
        eprintln!("--hz {}: the fixed rate must lie in 10..20000 Hz", args.hz);
        return None;
    }
    if let Some(p) = &args.screenshot {
        // A stale picture must not pass for a new one.
        let _ = std::fs::remove_file(p);
    }
    let mut app = App::new();
    if let Some(seconds) = args.simulate {
        // No window, no GPU: the schedule runner steps the app, one fixed step an update.
        app.add_plugins(
            DefaultPlugins
                .set(WindowPlugin { primary_window: None, exit_condition: ExitCondition::DontExit, ..default() })
                .set(RenderPlugin { render_creation: WgpuSettings { backends: None, ..default() }.into(), ..default() })
                .disable::<WinitPlugin>(),
        )
        .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
        .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_secs_f64(1.0 / args.hz)))
        .add_systems(Update, move |time: Res<Time>, mut exit: MessageWriter<AppExit>| {
            if time.elapsed_secs_f64() >= seconds {
                exit.write(AppExit::Success);
            }
        });
    } else {
        app.add_plugins(DefaultPlugins.set(WindowPlugin {
            primary_window: Some(Window { title: title.into(), resolution: (1280u32, 720u32).into(), ..default() }),
            ..default()
        }));
    }
    app.add_plugins(DrivelinePlugins::default())
        .insert_resource(Time::<Fixed>::from_hz(args.hz))
        .insert_resource(ClearColor(Color::srgb(0.55, 0.72, 0.92)))
        .insert_resource(CarRoad(road))
        .init_state::<Phase>()
        .add_plugins((controls::ControlsPlugin, hud::HudPlugin))
        .add_systems(Startup, menu)
        .add_systems(Update, choose.run_if(in_state(Phase::Menu)))
        .add_systems(OnExit(Phase::Menu), despawn_menu);
    if args.screenshot.is_some() {
        // A fixed 40 ms of simulated time per frame, whatever the renderer's speed.
        app.insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_millis(40)));
        app.add_systems(Update, screenshot_after_frames);
    }
    app.insert_resource(args);
    Some(app)
}

/// Marks the menu's UI.
#[derive(Component)]
struct MenuUi;

fn menu(mut commands: Commands, args: Res<Args>, mut next: ResMut<NextState<Phase>>) {
    if let Some(choice) = args.car {
        commands.queue(move |world: &mut World| start_car(world, choice));
        next.set(Phase::Driving);
        return;
    }
    let lines = [
        "DRIVELINE".to_string(),
        String::new(),
        "Choose a car:".to_string(),
        format!("  [1]  {}", CarChoice::Manual.label()),
        format!("  [2]  {}", CarChoice::Race.label()),
        format!("  [3]  {}", CarChoice::Auto.label()),
        format!("  [4]  {}", CarChoice::Truck.label()),
        String::new(),
        "Gamepad: X = 1, A = 2, B = 3, Y = 4".to_string(),
    ];
    commands.spawn((
        MenuUi,
        Node {
            width: percent(100),
            height: percent(100),
            justify_content: JustifyContent::Center,
            align_items: AlignItems::Center,
            ..default()
        },
        BackgroundColor(Color::srgba(0.02, 0.03, 0.05, 0.85)),
        children![(Text::new(lines.join("\n")), TextFont::from_font_size(30.0), TextColor(Color::WHITE))],
    ));
}

fn choose(
    mut commands: Commands,
    keys: Res<ButtonInput<KeyCode>>,
    pad: Res<controls::PadState>,
    mut next: ResMut<NextState<Phase>>,
) {
    let choice = if keys.just_pressed(KeyCode::Digit1) || pad.menu_pick == Some(0) {
        Some(CarChoice::Manual)
    } else if keys.just_pressed(KeyCode::Digit2) || pad.menu_pick == Some(1) {
        Some(CarChoice::Race)
    } else if keys.just_pressed(KeyCode::Digit3) || pad.menu_pick == Some(2) {
        Some(CarChoice::Auto)
    } else if keys.just_pressed(KeyCode::Digit4) || pad.menu_pick == Some(3) {
        Some(CarChoice::Truck)
    } else {
        None
    };
    if let Some(choice) = choice {
        commands.queue(move |world: &mut World| start_car(world, choice));
        next.set(Phase::Driving);
    }
}

fn despawn_menu(mut commands: Commands, ui: Query<Entity, With<MenuUi>>) {
    for e in &ui {
        commands.entity(e).despawn();
    }
}

/// The shipped vehicle files: next to the workspace when run with cargo, else `./assets`.
pub fn vehicle_path(file: &str) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/vehicles").join(file);
    if workspace.exists() { workspace } else { Path::new("assets/vehicles").join(file) }
}

/// Loads and validates the car (errors placed at file:line:col), then spawns its driveline.
fn start_car(world: &mut World, choice: CarChoice) {
    let path = vehicle_path(choice.file());
    let spec = match Vehicle::load(&path) {
        Ok(v) => v.spec().clone(),
        Err(e) => {
            error!("{e}");
            world.write_message(AppExit::error());
            return;
        }
    };
    let road = world.get_resource::<CarRoad>().map_or(Road::Body, |r| r.0);
    match spawn_vehicle(world, spec.clone(), road) {
        Ok(root) => {
            // A bad rate is refused by the plugin with a message; the driveline then steps
            // once per fixed step.
            if let Some(hz) = world.get_resource::<Args>().and_then(|a| a.driveline_hz) {
                world.entity_mut(root).insert(DrivelineRate(hz));
            }
            info!("driving {} ({})", choice.label(), path.display());
            world.insert_resource(Car { root, choice, spec });
        }
        Err(e) => {
            error!("{}: {e}", path.display());
            world.write_message(AppExit::error());
        }
    }
}

/// `--screenshot`: after `--frames` frames, capture the window; exit once it is on disk.
fn screenshot_after_frames(mut commands: Commands, args: Res<Args>, mut frame: Local<u32>) {
    *frame += 1;
    let Some(path) = args.screenshot.clone() else { return };
    if *frame != args.frames {
        return;
    }
    let mut save = save_to_disk(path.clone());
    commands.spawn(Screenshot::primary_window()).observe(
        move |captured: On<ScreenshotCaptured>, mut exit: MessageWriter<AppExit>| {
            save(captured);
            if path.exists() {
                exit.write(AppExit::Success);
            } else {
                error!("could not write the screenshot {}", path.display());
                exit.write(AppExit::error());
            }
        },
    );
}

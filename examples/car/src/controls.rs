//! The driver's controls: a gamepad through `driveline_gamepad` (sampled once per frame, presses
//! latched for the fixed step), the keyboard, or the autopilot; merged into the car's
//! [`VehicleInput`] at the start of every fixed step.
//!
//! | key | action |
//! |---|---|
//! | Up / W | throttle (ramps up while held) |
//! | Down / S | brake |
//! | Space | clutch pedal (down while held, comes up over 0.6 s) |
//! | E / Q | shift up / down (sequential box, automatic in manual mode; H-pattern: next gear) |
//! | 1..6, R, N | H-pattern gear (manual car); R and N also select reverse and neutral |
//! | P, D, M | automatic: park, drive, manual mode |
//! | Left / Right | change lane |
//! | H | handbrake |
//! | I | ignition on/off |
//! | K | starter (hold) |

use crate::{Args, Car, Phase};
use bevy::prelude::*;
use bevy_driveline::DrivelineSystems;
use bevy_driveline::vehicle::{VehicleInput, VehicleTelemetry};
use driveline_core::automatic::Selector;
use driveline_core::vehicle::driver::{Cycle, Driver, DriverParams};
use driveline_core::vehicle::{DriverInput, GearboxKind};
use driveline_gamepad::{ActionState, Bindings, Gamepads, PadEvent};

/// Installs the device sampling (every frame) and the input merge (every fixed step).
pub struct ControlsPlugin;

impl Plugin for ControlsPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<Keyboard>()
            .add_systems(Startup, open_gamepads)
            .add_systems(OnEnter(Phase::Driving), forget_menu_presses)
            .add_systems(PreUpdate, sample_devices.after(bevy::input::InputSystems))
            .add_systems(FixedUpdate, drive.in_set(DrivelineSystems::Input));
    }
}

/// The gamepad's latched actions, its connection messages and the menu pick.
#[derive(Resource)]
pub struct PadState {
    /// The actions (bindings applied, presses latched).
    pub actions: ActionState,
    /// Why there is (or is no) gamepad.
    pub status: String,
    /// Connection changes since the HUD last looked.
    pub notices: Vec<String>,
    /// A car chosen with the pad in the menu (0, 1, 2).
    pub menu_pick: Option<u8>,
    last_selector: Selector,
}

fn open_gamepads(world: &mut World) {
    let args = world.resource::<Args>().clone();
    let bindings = match &args.bindings {
        Some(path) => match Bindings::load(path) {
            Ok(b) => b,
            Err(e) => {
                // A bad bindings file is reported with its place and the defaults are used.
                error!("{e}; using the Xbox-style defaults");
                Bindings::xbox()
            }
        },
        None => Bindings::xbox(),
    };
    let pads = Gamepads::new();
    info!("{}", pads.status());
    world.insert_resource(PadState {
        actions: ActionState::new(bindings),
        status: pads.status().to_string(),
        notices: Vec::new(),
        menu_pick: None,
        last_selector: Selector::Park,
    });
    // gilrs handles are not `Send` on every platform: a main-thread resource.
    world.insert_non_send(pads);
}

/// The pad buttons that picked the car are the selector's: start driving from a fresh state
/// (in park) rather than in the gear the pick selected.
fn forget_menu_presses(mut pad: ResMut<PadState>) {
    pad.actions = ActionState::new(pad.actions.bindings().clone());
    pad.last_selector = Selector::Park;
    pad.menu_pick = None;
}

/// Keyboard state between frames and fixed steps: held keys are read each step, presses are
/// counted here and handed out one per step (like the pad's).
#[derive(Resource, Default)]
pub struct Keyboard {
    up: u32,
    down: u32,
    sent_up: bool,
    sent_down: bool,
    gear: Option<i32>,
    selector: Option<Selector>,
    ignition_toggles: u32,
    /// Pedal positions after the ramps, [0, 1].
    throttle: f64,
    brake: f64,
    clutch: f64,
    /// Lane change request, -1..1.
    pub steering: f64,
}

/// Samples the pad and counts key presses, once per frame.
fn sample_devices(
    mut pads: NonSendMut<Gamepads>,
    mut pad: ResMut<PadState>,
    keys: Res<ButtonInput<KeyCode>>,
    mut kb: ResMut<Keyboard>,
) {
    let pad = &mut *pad;
    let mut notices = Vec::new();
    pads.poll(&mut pad.actions, |e| {
        notices.push(match e {
            PadEvent::Connected => "gamepad connected".to_string(),
            _ => "gamepad disconnected: throttle released".to_string(),
        })
    });
    pad.notices.extend(notices);
    // Menu: X / A / B / Y pick a vehicle (they are the N / D / R / P selector buttons of the
    // bindings).
    let sel = pad.actions.selector();
    if sel != pad.last_selector {
        pad.menu_pick = match sel {
            Selector::Neutral => Some(0),
            Selector::Drive => Some(1),
            Selector::Reverse => Some(2),
            Selector::Park => Some(3),
            _ => None,
        };
        pad.last_selector = sel;
    } else {
        pad.menu_pick = None;
    }
    for k in [KeyCode::KeyE, KeyCode::PageUp] {
        kb.up += u32::from(keys.just_pressed(k));
    }
    for k in [KeyCode::KeyQ, KeyCode::PageDown] {
        kb.down += u32::from(keys.just_pressed(k));
    }
    let gears = [
        (KeyCode::Digit1, 1),
        (KeyCode::Digit2, 2),
        (KeyCode::Digit3, 3),
        (KeyCode::Digit4, 4),
        (KeyCode::Digit5, 5),
        (KeyCode::Digit6, 6),
        (KeyCode::KeyN, 0),
        (KeyCode::Digit0, 0),
        (KeyCode::KeyR, -1),
    ];
    for (k, g) in gears {
        if keys.just_pressed(k) {
            kb.gear = Some(g);
        }
    }
    let selectors = [
        (KeyCode::KeyP, Selector::Park),
        (KeyCode::KeyR, Selector::Reverse),
        (KeyCode::KeyN, Selector::Neutral),
        (KeyCode::KeyD, Selector::Drive),
        (KeyCode::KeyM, Selector::Manual),
    ];
    for (k, s) in selectors {
        if keys.just_pressed(k) {
            kb.selector = Some(s);
        }
    }
    kb.ignition_toggles += u32::from(keys.just_pressed(KeyCode::KeyI));
    let left = keys.pressed(KeyCode::ArrowLeft);
    let right = keys.pressed(KeyCode::ArrowRight);
    kb.steering = f64::from(u8::from(right)) - f64::from(u8::from(left));
}

/// What the driver does this step, kept across steps.
#[derive(Default)]
pub struct DriveState {
    /// H-pattern lever position (the keyboard and pad shift it gear by gear).
    gear: i32,
    selector: Selector,
    /// The pad's selector last seen (a change is a selection).
    pad_selector: Selector,
    ignition: bool,
    started: bool,
    autopilot: Option<(Driver, Cycle)>,
}

/// The autopilot's trace: wait 1 s, accelerate to 130 km/h over 18 s, hold.
fn autopilot_cycle() -> Cycle {
    Cycle { name: "autopilot".into(), time: vec![0.0, 1.0, 19.0, 3600.0], speed: vec![0.0, 0.0, 36.1, 36.1] }
}

/// Merges pad, keyboard and autopilot into the car's input at the start of every fixed step.
fn drive(
    time: Res<Time>,
    args: Res<Args>,
    car: Option<Res<Car>>,
    keys: Res<ButtonInput<KeyCode>>,
    mut pad: ResMut<PadState>,
    mut kb: ResMut<Keyboard>,
    mut state: Local<DriveState>,
    mut cars: Query<(&mut VehicleInput, &VehicleTelemetry)>,
) {
    let Some(car) = car else { return };
    let Ok((mut input, tel)) = cars.get_mut(car.root) else { return };
    let dt = time.delta_secs_f64();
    let kind = car.spec.gearbox.as_ref().map(|g| g.kind);
    let top = car.spec.gearbox.as_ref().map_or(8, |g| g.ratios.len() as i32);
    if !state.started {
        state.started = true;
        state.ignition = true;
        state.selector = Selector::Park;
        if args.autopilot {
            let params = DriverParams { upshift_rpm: 3000.0, a_throttle: 2.0, ..DriverParams::default() };
            state.autopilot = Some((Driver::new(&car.spec, params), autopilot_cycle()));
        }
    }
    if let Some((driver, cycle)) = state.autopilot.as_mut() {
        input.0 = driver.input(cycle, &tel.0, dt);
        return;
    }
    // Keyboard pedals: ramps, so a key is a usable pedal.
    let ramp = |x: f64, target: f64, up: f64, down: f64| {
        if target > x { (x + up * dt).min(target) } else { (x - down * dt).max(target) }
    };
    let throttle_key = if keys.any_pressed([KeyCode::ArrowUp, KeyCode::KeyW]) { 1.0 } else { 0.0 };
    let brake_key = if keys.any_pressed([KeyCode::ArrowDown, KeyCode::KeyS]) { 1.0 } else { 0.0 };
    let clutch_key = if keys.pressed(KeyCode::Space) { 1.0 } else { 0.0 };
    kb.throttle = ramp(kb.throttle, throttle_key, 3.0, 6.0);
    kb.brake = ramp(kb.brake, brake_key, 4.0, 8.0);
    kb.clutch = ramp(kb.clutch, clutch_key, 10.0, 1.0 / 0.6);
    // Latched key presses, one per step with a released step in between (rising edges).
    let kb_up = !kb.sent_up && kb.up > 0;
    kb.up -= u32::from(kb_up);
    kb.sent_up = kb_up;
    let kb_down = !kb.sent_down && kb.down > 0;
    kb.down -= u32::from(kb_down);
    kb.sent_down = kb_down;

    let p = pad.actions.driver_input();
    let mut d = DriverInput {
        throttle: p.throttle.max(kb.throttle),
        brake: p.brake.max(kb.brake),
        clutch: p.clutch.max(kb.clutch),
        parking_brake: p.parking_brake.max(if keys.pressed(KeyCode::KeyH) { 1.0 } else { 0.0 }),
        starter: p.starter || keys.pressed(KeyCode::KeyK),
        ..DriverInput::default()
    };
    let up = p.shift_up || kb_up;
    let down = p.shift_down || kb_down;
    // The pad's selector wins when it changes; the keyboard's when a key was pressed.
    if p.selector != state.pad_selector {
        state.pad_selector = p.selector;
        state.selector = p.selector;
    }
    if let Some(s) = kb.selector.take() {
        state.selector = s;
    }
    if kb.ignition_toggles > 0 {
        kb.ignition_toggles = 0;
        state.ignition = !state.ignition;
    }
    d.ignition = state.ignition && p.ignition;
    match kind {
        Some(GearboxKind::Manual) => {
            // H-pattern: a pad's H-gate wins; bumpers and keys step the lever.
            if let Some(g) = kb.gear.take() {
                state.gear = g;
            }
            if up {
                state.gear = (state.gear + 1).min(top);
            }
            if down {
                state.gear = (state.gear - 1).max(-1);
            }
            d.gear = if p.gear != 0 { p.gear } else { state.gear };
        }
        Some(GearboxKind::Sequential) => {
            kb.gear = None;
            d.shift_up = up;
            d.shift_down = down;
        }
        None => {
            kb.gear = None;
            d.selector = state.selector;
            d.shift_up = up;
            d.shift_down = down;
        }
    }
    input.0 = d;
}

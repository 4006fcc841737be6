//! The action mapping, driven by scripted device events (no physical device): latching of
//! presses across frames and fixed steps, analogue shaping, disconnects, bindings errors, and a
//! car shifting from paddle presses.

use driveline_core::automatic::Selector;
use driveline_core::vehicle::Vehicle;
use driveline_gamepad::{ActionState, Axis, Bindings, Button, Gamepads, PadEvent};

fn pad() -> ActionState {
    ActionState::new(Bindings::xbox())
}

#[test]
fn a_press_shorter_than_a_step_shifts_once_and_a_held_button_shifts_once() {
    let mut s = pad();
    // Pressed and released within one frame, before the next fixed step.
    s.handle(PadEvent::Button(Button::RightTrigger, 1.0));
    s.handle(PadEvent::Button(Button::RightTrigger, 0.0));
    let ups: Vec<bool> = (0..4).map(|_| s.driver_input().shift_up).collect();
    assert_eq!(ups, [true, false, false, false]);
    // Held for many steps: one shift.
    s.handle(PadEvent::Button(Button::LeftTrigger, 1.0));
    let downs: Vec<bool> = (0..10).map(|_| s.driver_input().shift_down).collect();
    assert_eq!(downs.iter().filter(|d| **d).count(), 1);
    // Two presses inside one frame: two shifts, with a step between (two rising edges).
    for v in [1.0, 0.0, 1.0, 0.0] {
        s.handle(PadEvent::Button(Button::RightTrigger, v));
    }
    let ups: Vec<bool> = (0..5).map(|_| s.driver_input().shift_up).collect();
    assert_eq!(ups, [true, false, true, false, false]);
}

#[test]
fn analogue_controls_get_dead_zone_curve_and_inversion() {
    let mut s = pad();
    // Throttle: dead zone 0.03, linear.
    s.handle(PadEvent::Button(Button::RightTrigger2, 0.02));
    assert_eq!(s.driver_input().throttle, 0.0);
    s.handle(PadEvent::Button(Button::RightTrigger2, 0.515));
    assert!((s.driver_input().throttle - 0.5).abs() < 1e-12);
    // Clutch on the right stick, inverted: stick down (-1) floors it.
    s.handle(PadEvent::Axis(Axis::RightStickY, -1.0));
    assert_eq!(s.driver_input().clutch, 1.0);
    s.handle(PadEvent::Axis(Axis::RightStickY, 1.0));
    assert_eq!(s.driver_input().clutch, 0.0);
    // Steering keeps its sign, curve 1.5 after the dead zone.
    s.handle(PadEvent::Axis(Axis::LeftStickX, -0.54));
    let st = s.analog(driveline_gamepad::Action::Steering);
    assert!((st + 0.5f64.powf(1.5)).abs() < 1e-12, "{st}");
    // Non-finite device values are ignored.
    s.handle(PadEvent::Button(Button::RightTrigger2, f64::NAN));
    assert!((s.driver_input().throttle - 0.5).abs() < 1e-12);
}

#[test]
fn a_disconnect_lifts_the_throttle_and_applies_brake_and_clutch() {
    let mut s = pad();
    s.handle(PadEvent::Button(Button::RightTrigger2, 1.0));
    assert_eq!(s.driver_input().throttle, 1.0);
    s.handle(PadEvent::Disconnected);
    let i = s.driver_input();
    assert!(!s.connected());
    assert_eq!((i.throttle, i.brake, i.clutch), (0.0, 0.3, 1.0));
    s.handle(PadEvent::Connected);
    assert_eq!(s.driver_input().throttle, 0.0, "a reconnected pad starts from rest");
}

#[test]
fn selector_buttons_and_defaults_load() {
    let mut s = ActionState::new(Bindings::playstation());
    assert_eq!(s.driver_input().selector, Selector::Park);
    s.handle(PadEvent::Button(Button::South, 1.0));
    assert_eq!(s.driver_input().selector, Selector::Drive);
    s.handle(PadEvent::Button(Button::Select, 1.0));
    assert!(!s.driver_input().ignition, "Select toggles the ignition");
}

#[test]
fn bindings_errors_are_placed_and_named() {
    let good = r#"Bindings(
    name: "t",
    analog: [
        (action: Throttle, source: Button(RightTrigger2)),
    ],
    digital: [
        (action: ShiftUp, source: Button(RightTrigger)),
    ],
)"#;
    assert!(Bindings::parse(good, "t.ron").is_ok());
    let cases = [
        (good.replace("Throttle", "Thrust"), "t.ron:4:", "Thrust"),
        (good.replace("Button(RightTrigger2)", "Axis(LeftStickW)"), "t.ron:4:", "LeftStickW"),
        (good.replace("(action: ShiftUp", "(action: Brake"), "t.ron:7:", "analogue"),
        (good.replace("(action: Throttle", "(action: ShiftDown"), "t.ron:4:", "button action"),
        (good.replace("Button(RightTrigger2))", "Button(RightTrigger2), dead_zone: 1.5)"), "t.ron:4:", "dead_zone"),
        (good.replace("(action: ShiftUp", "(action: Gear(9)"), "t.ron:7:", "1 to 7"),
    ];
    for (text, place, word) in cases {
        let e = Bindings::parse(&text, "t.ron").unwrap_err();
        assert!(e.starts_with(place) && e.contains(word), "expected `{place}` and `{word}` in: {e}");
    }
}

#[test]
fn no_device_is_not_an_error() {
    // In CI there is no gamepad (and maybe no udev): the app runs on.
    let mut g = Gamepads::new();
    assert!(!g.status().is_empty());
    let mut s = pad();
    let mut changes = 0;
    g.poll(&mut s, |_| changes += 1);
    let _ = s.driver_input();
}

#[test]
fn paddle_presses_shift_the_automatic_in_manual_mode() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/vehicles/sedan_8hp.ron");
    let mut car = Vehicle::load(&path).unwrap();
    let mut s = pad();
    s.handle(PadEvent::Button(Button::DPadUp, 1.0)); // manual mode
    s.handle(PadEvent::Button(Button::RightTrigger2, 0.4));
    let mut shifts = 0;
    for k in 0..8000 {
        // Frames at 60 Hz sample the pad; the car steps at 1 kHz.
        if k == 2000 || k == 5000 {
            // A 5 ms tap, inside one frame.
            s.handle(PadEvent::Button(Button::RightTrigger, 1.0));
            s.handle(PadEvent::Button(Button::RightTrigger, 0.0));
        }
        let input = s.driver_input();
        car.step(&input, 1e-3).unwrap();
        shifts += car
            .events()
            .iter()
            .filter(|e| matches!(e.kind, driveline_core::vehicle::VehicleEventKind::ShiftCompleted { .. }))
            .count();
    }
    // The garage shift into 1st, then exactly the two tapped upshifts.
    assert_eq!(car.telemetry().engaged_gear, 3);
    assert_eq!(shifts, 3);
}

/// Events inserted into a real gilrs context (its event queue, as a driver would fill it) go
/// through `Gamepads::poll` and the bindings: a trigger press shifts once, the throttle trigger
/// moves the pedal, a disconnect lifts it. gilrs ids and codes cannot be built directly; their
/// serde forms can (Code(EvCode(linux EvCode)): evdev kind 1 = key, code 304 = BTN_SOUTH).
#[cfg(target_os = "linux")]
#[test]
fn gilrs_events_inserted_into_the_context_reach_the_fixed_step() {
    use gilrs::{Event, EventType, GamepadId, GilrsBuilder, ev::Code};
    let gilrs = match GilrsBuilder::new().with_default_filters(false).build() {
        Ok(g) => g,
        // No udev or no device support here: gilrs still hands out a working (dummy) context.
        Err(gilrs::Error::NotImplemented(g)) => g,
        Err(e) => panic!("gilrs context: {e}"),
    };
    let id: GamepadId = ron::from_str("(0)").expect("gamepad id");
    let code: Code = ron::from_str("((EvCode(kind: 1, code: 304)))").expect("event code");
    let mut pads = Gamepads::from_gilrs(gilrs);
    let mut s = pad();
    let events = [
        EventType::Connected,
        EventType::ButtonPressed(Button::RightTrigger, code),
        EventType::ButtonReleased(Button::RightTrigger, code),
        EventType::ButtonChanged(Button::RightTrigger2, 0.8, code),
    ];
    for e in events {
        assert!(pads.insert_event(Event::new(id, e)));
    }
    let mut changes = Vec::new();
    pads.poll(&mut s, |e| changes.push(e));
    assert_eq!(changes, [PadEvent::Connected]);
    let steps: Vec<_> = (0..3).map(|_| s.driver_input()).collect();
    assert_eq!(steps.iter().map(|d| d.shift_up).collect::<Vec<_>>(), [true, false, false]);
    // 0.8 through the 0.03 dead zone: (0.8 - 0.03) / 0.97.
    assert!((steps[0].throttle - (0.8f64 - 0.03) / 0.97).abs() < 1e-6, "{}", steps[0].throttle);
    pads.insert_event(Event::new(id, EventType::Disconnected));
    pads.poll(&mut s, |e| changes.push(e));
    assert_eq!(changes.last(), Some(&PadEvent::Disconnected));
    let d = s.driver_input();
    assert_eq!(d.throttle, 0.0);
    assert_eq!(d.clutch, 1.0, "the Xbox bindings floor the clutch on a disconnect");
}

//! UDP telemetry on loopback: packets arrive at the configured rate and carry the telemetry.

use driveline::core::automatic::Selector;
use driveline::core::vehicle::udp::{PACKET_LEN, UdpTelemetry, decode};
use driveline::core::{DriverInput, Vehicle};
use std::net::UdpSocket;
use std::path::Path;
use std::time::Duration;

#[test]
fn telemetry_streams_over_loopback_at_its_rate() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut tx = UdpTelemetry::new(rx.local_addr().unwrap(), 50.0).unwrap();
    let mut car = Vehicle::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/vehicles/sedan_8hp.ron")).unwrap();
    let input = DriverInput { selector: Selector::Drive, throttle: 0.4, ..DriverInput::default() };
    let mut sent = Vec::new();
    for _ in 0..2000 {
        car.step(&input, 1e-3).unwrap();
        if tx.update(car.telemetry(), &input) {
            sent.push(*car.telemetry());
        }
    }
    // 2 s at 50 Hz of simulated time.
    assert_eq!(sent.len(), 100);
    let mut buf = [0u8; 512];
    for (k, t) in sent.iter().enumerate() {
        let n = rx.recv(&mut buf).expect("a packet per period");
        assert_eq!(n, PACKET_LEN);
        let p = decode(&buf[..n]).expect("a version 1 packet");
        assert_eq!(p.sequence, k as u32);
        assert_eq!(p.time, t.time);
        assert_eq!(p.engine_rpm, t.engine_rpm as f32);
        assert_eq!(p.speed, t.speed as f32);
        assert_eq!(p.engaged_gear as i32, t.engaged_gear);
        assert_eq!(p.throttle_pedal, 0.4f32);
        assert_eq!(p.wheel_speed[2], t.wheel_speed[2] as f32);
        assert_eq!(p.flags & 1, u8::from(t.running));
    }
    assert!(sent.last().unwrap().speed > 1.0, "the car drove off");
    assert!(decode(&buf[..10]).is_none());
}

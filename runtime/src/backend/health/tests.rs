use super::*;

#[test]
fn register_starts_with_initial_good_results() {
    // (window, threshold, initial) -> (healthy, bits)
    let cases = [
        ((8, 3, 2), (false, "------HH")),
        ((8, 3, 3), (true, "-----HHH")),
        ((5, 3, 9), (true, "HHHHH")),
        ((4, 0, 0), (true, "----")),
        ((0, 1, 1), (true, "H")),
    ];
    for ((window, threshold, initial), (healthy, bits)) in cases {
        let register = Register::new(window, threshold, initial);
        assert_eq!(register.healthy(), healthy, "{window}/{threshold}/{initial}");
        assert_eq!(register.bits(), bits, "{window}/{threshold}/{initial}");
    }
}

#[test]
fn results_shift_through_the_window() {
    let mut register = Register::new(4, 2, 4);
    for (good, healthy, bits) in [
        (false, true, "HHH-"),
        (false, true, "HH--"),
        (false, false, "H---"),
        (false, false, "----"),
        (true, false, "---H"),
        (true, true, "--HH"),
    ] {
        register.push(good);
        assert_eq!((register.healthy(), register.bits().as_str()), (healthy, bits));
    }
}

#[test]
fn a_full_64_slot_window_works() {
    let mut register = Register::new(200, 64, 64);
    assert_eq!(register.good(), 64);
    register.push(false);
    assert_eq!(register.good(), 63);
    assert!(!register.healthy());
    assert_eq!(register.bits().len(), 64);
}

#[test]
fn health_reports_transitions_once() {
    let probe = ProbeDecl {
        name: None,
        url: "/".into(),
        request: None,
        expected_response: 200,
        timeout: std::time::Duration::from_secs(1),
        interval: std::time::Duration::from_secs(1),
        window: 3,
        threshold: 2,
        initial: 2,
    };
    let start = SystemTime::UNIX_EPOCH;
    let later = start + std::time::Duration::from_secs(10);
    let health = Health::new(&probe, start);
    assert!(health.healthy());
    assert_eq!(health.record(Err("timeout".into()), later), None, "HH- keeps 2");
    assert_eq!(
        health.record(Err("status 500".into()), later),
        Some(Transition::WentSick)
    );
    assert_eq!(health.record(Err("status 500".into()), later), None);
    let report = health.report();
    assert_eq!(
        (report.healthy, report.good, report.bits.as_str()),
        (false, 0, "---")
    );
    assert_eq!(report.last_change, later);
    assert_eq!(report.last_failure.as_deref(), Some("status 500"));
    health.record(Ok(()), later);
    assert_eq!(health.record(Ok(()), later), Some(Transition::WentHealthy));
    assert!(health.healthy());
}

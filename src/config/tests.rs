use super::*;

fn parse(text: &str) -> Result<FileConfig, ConfigError> {
    parse_file(Path::new("rlbd.toml"), text)
}

#[test]
fn empty_file_is_all_defaults() {
    let f = parse("").unwrap();
    assert_eq!(f.policy, PolicyConfig::default());
    assert_eq!(f.steering, SteeringConfig::default());
}

#[test]
fn full_file_parses() {
    let f = parse(
        "bond = \"bond0\"\nlog_level = \"debug\"\n[policy]\nthreshold = 0.7\nhold_down = 10\n\
         [capacity]\neth0 = 1000\n[steering]\nrepeats = 2\n[capture]\ntable_size = 65536\n",
    )
    .unwrap();
    assert_eq!(f.bond.as_deref(), Some("bond0"));
    assert_eq!(f.policy.threshold, 0.7);
    assert_eq!(f.capacity["eth0"], 1000.0);
    assert_eq!(f.capture.table_size, 65536);
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let e = parse("bond = \"bond0\"\n[policy]\nthreshhold = 0.7\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("threshhold") && e.contains("rlbd.toml:3"), "{e}");
}

#[test]
fn out_of_range_value_is_named_with_its_line() {
    let e = parse("\n[policy]\nthreshold = 1.5\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("policy.threshold") && e.contains("rlbd.toml:3"),
        "{e}"
    );
    let e = parse("[steering]\nrepeats = 0\n").unwrap_err().to_string();
    assert!(e.contains("steering.repeats") && e.contains(":2"), "{e}");
    let e = parse("[capacity]\neth0 = -1\n").unwrap_err().to_string();
    assert!(e.contains("capacity.eth0"), "{e}");
    let e = parse("log_level = \"loud\"\n").unwrap_err().to_string();
    assert!(e.contains("log_level"), "{e}");
}

#[test]
fn sampling_knobs_are_validated_and_named() {
    let f = parse("[capture]\nsampling = \"off\"\nmax_frames_per_sec = 20000\n").unwrap();
    assert_eq!(f.capture.sampling_limit(), None);
    let f = parse("[capture]\nmax_frames_per_sec = 20000\n").unwrap();
    assert_eq!(f.capture.sampling_limit(), Some(20_000));
    assert_eq!(
        CaptureConfig::default().sampling_limit(),
        Some(crate::capture::sampling::DEFAULT_MAX_FRAMES_PER_SEC)
    );
    let e = parse("[capture]\n\nsampling = \"sometimes\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("capture.sampling") && e.contains("rlbd.toml:3"),
        "{e}"
    );
    let e = parse("[capture]\nmax_frames_per_sec = 10\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("capture.max_frames_per_sec") && e.contains(":2"),
        "{e}"
    );
}

#[test]
fn counting_knob_is_validated_and_resolved_with_sampling() {
    let mode = |text: &str| parse(text).unwrap().capture.kernel_counting();
    assert_eq!(
        CaptureConfig::default().kernel_counting(),
        KernelCounting::Try
    );
    assert_eq!(
        mode("[capture]\ncounting = \"auto\"\n"),
        KernelCounting::Try
    );
    // Sampling off still means every captured frame counted.
    assert_eq!(mode("[capture]\nsampling = \"off\"\n"), KernelCounting::Off);
    assert_eq!(
        mode("[capture]\ncounting = \"kernel\"\nsampling = \"off\"\n"),
        KernelCounting::Require
    );
    assert_eq!(
        mode("[capture]\ncounting = \"packet\"\n"),
        KernelCounting::Off
    );
    let e = parse("[capture]\n\ncounting = \"ebpf\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("capture.counting") && e.contains("rlbd.toml:3"),
        "{e}"
    );
}

#[test]
fn wrong_type_is_reported() {
    let e = parse("[policy]\nwindow = \"three\"\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "rlbd.toml:2: policy.window: expected a whole number, 0 or more, found the string \"three\""
    );
}

#[test]
fn parser_errors_name_file_line_and_key_in_plain_words() {
    let msg = |text: &str| parse(text).unwrap_err().to_string();
    assert_eq!(
        msg("bond = \"bond0\"\n\n[policy]\nwindow = 3\nthreshold = \"high\"\n"),
        "rlbd.toml:5: policy.threshold: expected a number, found the string \"high\""
    );
    assert_eq!(
        msg("dry_run = 1\n"),
        "rlbd.toml:1: dry_run: expected true or false, found the whole number 1"
    );
    assert_eq!(
        msg("[capture]\ntable_size = -5\n"),
        "rlbd.toml:2: capture.table_size: the whole number -5 is out of range: expected a whole \
         number, 0 or more"
    );
    assert_eq!(
        msg("ports = \"eth0\"\n"),
        "rlbd.toml:1: ports: expected a list, e.g. [\"eth0\", \"eth1\"], found the string \"eth0\""
    );
    // A quoted key in a section, and an unknown key with the ones that would do.
    assert_eq!(
        msg("[capacity]\n\"eth0\" = \"fast\"\n"),
        "rlbd.toml:2: capacity.eth0: expected a number, found the string \"fast\""
    );
    let e = msg("[steering]\nrepeat = 2\n");
    assert!(
        e.starts_with("rlbd.toml:2: steering.repeat: not a known key; the keys here are repeats,"),
        "{e}"
    );
    assert!(!e.contains('`'), "{e}");
}

#[test]
fn range_errors_name_the_line_of_their_own_section() {
    // `repeats` is a key of [steering] only; a same-named key elsewhere must not be taken.
    let e = parse("[capacity]\neth0 = 100\neth1 = 0\n")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "rlbd.toml:3: capacity.eth1: 0 is not a positive Mbit/s");
    let e = parse("[capacity]\n\"eth0\" = -1\n")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "rlbd.toml:2: capacity.eth0: -1 is not a positive Mbit/s");
    let e = parse("threshold = 2\n").unwrap_err().to_string();
    assert!(e.contains("rlbd.toml:1: threshold:"), "{e}");
    let e = parse("[policy]\nwindow = 5\n[steering]\n[policy.x]\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("rlbd.toml:4"), "{e}");
    let e = parse("[steering]\nrepeats = 1\n[policy]\nthreshold = 0.5\nhits = 9\n")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "rlbd.toml:5: policy.hits: 9 is not in 1..=window (3)");
    let e = parse("policy.threshold = 3\n").unwrap_err().to_string();
    assert!(
        e.starts_with("rlbd.toml:1: policy.threshold: 3 is not in"),
        "{e}"
    );
}

#[test]
fn command_line_overrides_file_and_is_validated() {
    let dir = std::env::temp_dir().join(format!("rlbd-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.toml");
    std::fs::write(
        &path,
        "ports = [\"p0\", \"p1\"]\n[policy]\nthreshold = 0.7\n[capacity]\np0 = 10\n",
    )
    .unwrap();
    let knobs = Overrides {
        config: Some(path.clone()),
        capacity: vec!["p0=100".into()],
        hits: Some(3),
        verbose: 1,
        ..Default::default()
    };
    let s = resolve(&knobs, None, false).unwrap();
    assert_eq!(
        s.target,
        Some(Target::Ports(vec!["p0".into(), "p1".into()]))
    );
    assert_eq!(s.policy.threshold, 0.7);
    assert_eq!(s.policy.hits, 3);
    assert_eq!(s.capacity_mbps["p0"], 100.0);
    assert_eq!(s.log_level, "debug");
    let bad = Overrides {
        config: Some(path.clone()),
        hits: Some(9),
        ..Default::default()
    };
    assert!(resolve(&bad, None, false)
        .unwrap_err()
        .to_string()
        .contains("--hits"));
    let bad = Overrides {
        config: Some(path),
        capacity: vec!["p0".into()],
        ..Default::default()
    };
    assert!(resolve(&bad, None, false)
        .unwrap_err()
        .to_string()
        .contains("--capacity"));
    let missing = Overrides {
        config: Some(dir.join("nope.toml")),
        ..Default::default()
    };
    assert!(resolve(&missing, None, false)
        .unwrap_err()
        .to_string()
        .contains("nope.toml"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn observability_section_is_validated_and_overridable() {
    let f = parse(
        "[observability]\ncontrol_socket = \"/tmp/x.sock\"\nmetrics_file = \"/run/rlbd/bond0.prom\"\n\
         metrics_interval_secs = 5\n",
    )
    .unwrap();
    assert_eq!(f.observability.metrics_interval_secs, 5);
    assert_eq!(
        f.observability.control_socket_for("bond0"),
        Some(PathBuf::from("/tmp/x.sock"))
    );
    assert_eq!(
        ObservabilityConfig::default().control_socket_for("bond0"),
        Some(PathBuf::from("/run/rlbd/bond0.sock"))
    );
    let off = parse("[observability]\ncontrol_socket = \"\"\n").unwrap();
    assert_eq!(off.observability.control_socket_for("bond0"), None);
    let e = parse("[observability]\n\nmetrics_interval_secs = 0\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("observability.metrics_interval_secs") && e.contains(":3"),
        "{e}"
    );
    let e = parse("[observability]\ncontrol_socket = \"rel.sock\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("observability.control_socket"), "{e}");
    let long = format!("/{}", "a".repeat(120));
    let e = parse(&format!("[observability]\ncontrol_socket = \"{long}\"\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("107 bytes"), "{e}");
    let e = parse("[observability]\nmetrics_file = \"/var/lib/\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("observability.metrics_file"), "{e}");
    assert!(parse("[observability]\nmetrics = 1\n").is_err());

    let mut s = resolve(
        &Overrides {
            config: Some("/dev/null".into()),
            ..Default::default()
        },
        Some(Target::Bond("bond0".into())),
        false,
    )
    .unwrap();
    assert_eq!(s.observability, ObservabilityConfig::default());
    s.override_observability(Some("/tmp/c.sock".into()), None, Some(2))
        .unwrap();
    assert_eq!(s.observability.metrics_interval_secs, 2);
    assert_eq!(
        s.observability.control_socket,
        Some(PathBuf::from("/tmp/c.sock"))
    );
    let e = s
        .override_observability(None, None, Some(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--metrics-interval"), "{e}");
    let again = parse(&s.to_toml()).unwrap();
    assert_eq!(
        again.observability.control_socket,
        s.observability.control_socket
    );
}

#[test]
fn a_shared_metrics_file_names_each_instance_its_own() {
    let f = parse("[observability]\nmetrics_file = \"/run/rlbd/{name}.prom\"\n").unwrap();
    let o = &f.observability;
    assert_eq!(
        o.metrics_file_for("bond0"),
        Some(PathBuf::from("/run/rlbd/bond0.prom"))
    );
    assert_eq!(
        o.metrics_file_for("bond1"),
        Some(PathBuf::from("/run/rlbd/bond1.prom"))
    );
    let plain = parse("[observability]\nmetrics_file = \"/run/rlbd/x.prom\"\n").unwrap();
    assert_eq!(
        plain.observability.metrics_file_for("bond0"),
        Some(PathBuf::from("/run/rlbd/x.prom"))
    );
    assert_eq!(
        ObservabilityConfig::default().metrics_file_for("bond0"),
        None
    );
}

#[test]
fn a_bond_reads_its_own_file_first() {
    let t = Target::Bond("bond0".into());
    assert_eq!(
        default_paths(Some(&t)),
        vec![
            PathBuf::from("/etc/rlbd/bond0.toml"),
            PathBuf::from(DEFAULT_CONFIG_PATH)
        ]
    );
    assert_eq!(
        default_paths(Some(&Target::Bond("../x".into()))),
        vec![PathBuf::from(DEFAULT_CONFIG_PATH)]
    );
    assert_eq!(
        default_paths(None),
        vec![PathBuf::from(DEFAULT_CONFIG_PATH)]
    );
}

#[test]
fn effective_settings_round_trip_as_toml() {
    let s = resolve(
        &Overrides {
            config: Some("/dev/null".into()),
            ..Default::default()
        },
        Some(Target::Bond("bond0".into())),
        false,
    )
    .unwrap();
    let again = parse(&s.to_toml()).unwrap();
    assert_eq!(again.bond.as_deref(), Some("bond0"));
    assert_eq!(again.policy, s.policy);
}

#[test]
fn a_name_no_interface_can_have_is_a_configuration_error_naming_its_key_and_line() {
    for (text, key, line) in [
        ("bond = \"bond0/x\"\n", "bond", ":1"),
        ("\nports = [\"eth0\", \"eth 1\"]\n", "ports", ":2"),
        ("bond = \"averyveryverylong\"\n", "bond", ":1"),
        ("[capacity]\n\"..\" = 1000\n", "capacity...", ":2"),
        ("bond = \"\"\n", "bond", ":1"),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(line), "{text:?}: {e}");
    }
    // The kernel's own rules: VLANs, dots, dashes and 15 bytes are fine.
    for name in ["bond0.100", "enp1s0f0-1", "abcdefghijklmno", "@x"] {
        assert_eq!(interface_name_error(name), None, "{name}");
    }
    for (target, key) in [
        (Target::Bond("../../etc/x".into()), "--bond"),
        (
            Target::Ports(vec!["eth0".into(), "eth1:0".into()]),
            "--ports",
        ),
    ] {
        let e = load_file(None, Some(&target)).unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    }
    let e = parse_capacity("eth0/x=1000").unwrap_err().to_string();
    assert!(e.contains("--capacity") && e.contains("eth0/x"), "{e}");
}

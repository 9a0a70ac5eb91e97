//! End-to-end checks on the SVG text of every chart type: well-formed (a tiny tag
//! checker), titled, every series in the legend, escaping, degenerate inputs; and one
//! sample SVG per chart type written to `target/plot-samples/` for people to look at.
#![allow(clippy::unwrap_used)]

use gantry_plot::{BarChart, BarGroup, LineChart, Series, cdf};
use std::path::PathBuf;

/// Checks that `svg` is one `<svg>` element whose tags all balance, with no stray
/// `<` or `&` in text. Returns the number of elements.
fn check_well_formed(svg: &str) -> usize {
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{}",
        &svg[..60.min(svg.len())]
    );
    let mut stack: Vec<&str> = Vec::new();
    let mut elements = 0;
    let mut rest = svg;
    let mut closed_root = false;
    while let Some(open) = rest.find('<') {
        check_text(&rest[..open]);
        assert!(
            !closed_root || rest[..open].trim().is_empty(),
            "content after </svg>"
        );
        let close = rest[open..].find('>').unwrap() + open;
        let tag = &rest[open + 1..close];
        assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name), "mismatched </{name}>");
            closed_root = stack.is_empty();
        } else {
            assert!(!closed_root, "second root element");
            elements += 1;
            let name = tag.split([' ', '/']).next().unwrap();
            assert!(
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
                "bad name in <{tag}>"
            );
            check_attributes(tag);
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        rest = &rest[close + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert!(rest.trim().is_empty());
    elements
}

/// Text between tags: every `&` starts one of the five XML entities.
fn check_text(text: &str) {
    assert!(!text.contains('>'), "raw '>' in text: {text}");
    for (i, _) in text.match_indices('&') {
        let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
            .iter()
            .any(|e| text[i..].starts_with(e));
        assert!(ok, "bare '&' in text: {text}");
    }
}

/// Attribute values are double-quoted, in even numbers of quotes, and never NaN.
fn check_attributes(tag: &str) {
    assert_eq!(
        tag.matches('"').count() % 2,
        0,
        "unbalanced quotes in <{tag}>"
    );
    assert!(
        !tag.contains("NaN") && !tag.contains("inf"),
        "non-finite number in <{tag}>"
    );
}

/// The target directory this test was built into, plus `plot-samples`.
fn samples_dir() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let target = tmp.parent().map(PathBuf::from).unwrap_or(tmp);
    target.join("plot-samples")
}

/// A deterministic pseudo-random stream in [0, 1).
fn rng(seed: u64) -> impl FnMut() -> f64 {
    let mut s = seed;
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    }
}

const POLICIES: [&str; 4] = ["fifo", "first-fit", "priority-preempt", "shortest-first"];

fn allocation_vs_load() -> LineChart {
    let mut chart = LineChart::new(
        "GPU allocation vs arrived workload",
        "arrived workload (% of cluster capacity)",
        "GPUs allocated (%)",
    );
    for (i, name) in POLICIES.iter().enumerate() {
        let ceiling = 97.0 - 9.0 * i as f64;
        let points = (0..=26)
            .map(|k| {
                let load = k as f64 * 5.0;
                (
                    load,
                    ceiling
                        * (1.0 - (-load / (ceiling * 0.9)).exp()).min(1.0)
                        * (load / 60.0).clamp(0.6, 1.0),
                )
            })
            .collect();
        chart.series.push(Series::new(*name, points));
    }
    chart.x_range = Some((0.0, 130.0));
    chart.y_range = Some((0.0, 100.0));
    chart
}

fn allocation_over_time() -> LineChart {
    let mut chart = LineChart::new(
        "GPU allocation over time (load 90%)",
        "time (hours)",
        "GPUs allocated",
    );
    for (i, name) in POLICIES.iter().take(3).enumerate() {
        let mut r = rng(i as u64 + 1);
        // One sample a minute for three days: 4320 points, thinned when drawn.
        let points = (0..4320)
            .map(|m| {
                let t = m as f64 / 60.0;
                let daily = 0.5 + 0.35 * (t / 24.0 * std::f64::consts::TAU).sin();
                (
                    t,
                    ((daily * 512.0 - 40.0 * i as f64) + r() * 30.0)
                        .clamp(0.0, 512.0)
                        .round(),
                )
            })
            .collect();
        chart.series.push(Series::new(*name, points));
    }
    chart.step = true;
    chart
}

fn wait_cdf() -> LineChart {
    let mut chart = LineChart::new(
        "Wait time until start",
        "wait (seconds, log scale)",
        "fraction of jobs",
    );
    for (i, name) in POLICIES.iter().enumerate() {
        let mut r = rng(100 + i as u64);
        let waits: Vec<f64> = (0..20_000)
            .map(|_| {
                if r() < 0.15 + 0.08 * i as f64 {
                    0.0
                } else {
                    (r() * (9.0 + i as f64)).exp() * 2.0
                }
            })
            .collect();
        chart.series.push(Series::new(*name, cdf(&waits)));
    }
    chart.step = true;
    chart.x_log = true;
    chart.y_range = Some((0.0, 1.0));
    chart
}

fn usage_per_account() -> BarChart {
    let mut chart = BarChart::new("GPU-hours per account", "GPU-hours");
    chart.categories = [
        "vision",
        "nlp-research",
        "speech",
        "robotics",
        "infra & ops",
        "interns",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (i, name) in POLICIES.iter().take(3).enumerate() {
        let values = [12_400.0, 9_800.0, 4_100.0, 2_750.0, 310.0, 95.0]
            .iter()
            .enumerate()
            .map(|(k, v)| v * (1.0 + 0.12 * ((i + k) % 3) as f64 - 0.1 * i as f64))
            .collect();
        chart.groups.push(BarGroup::new(*name, values));
    }
    chart
}

#[test]
fn samples_are_well_formed_and_written() {
    let dir = samples_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let charts: [(&str, String, Vec<&str>); 4] = [
        (
            "allocation-vs-load.svg",
            allocation_vs_load().to_svg(),
            POLICIES.to_vec(),
        ),
        (
            "allocation-over-time.svg",
            allocation_over_time().to_svg(),
            POLICIES[..3].to_vec(),
        ),
        ("wait-cdf.svg", wait_cdf().to_svg(), POLICIES.to_vec()),
        (
            "usage-per-account.svg",
            usage_per_account().to_svg(),
            POLICIES[..3].to_vec(),
        ),
    ];
    for (file, svg, names) in &charts {
        let elements = check_well_formed(svg);
        assert!(elements > 20, "{file}: only {elements} elements");
        for name in names {
            assert!(
                svg.contains(&format!(">{name}</text>")),
                "{file}: no legend entry for {name}"
            );
        }
        assert!(!svg.contains("no data"), "{file}");
        assert!(svg.len() < 200_000, "{file}: {} bytes", svg.len());
        std::fs::write(dir.join(file), svg).unwrap();
    }
    assert!(
        charts[0]
            .1
            .contains(">GPU allocation vs arrived workload</text>")
    );
    assert!(charts[3].1.contains("infra &amp; ops"));
}

#[test]
fn ticks_on_a_0_to_130_axis_are_round() {
    let mut chart = LineChart::new("t", "x", "y");
    chart
        .series
        .push(Series::new("s", vec![(0.0, 0.0), (130.0, 130.0)]));
    let svg = chart.to_svg();
    // y fits the data widened to round ticks: 0, 20, …, 140.
    for t in ["0", "20", "40", "60", "80", "100", "120", "140"] {
        assert!(
            svg.contains(&format!("text-anchor=\"end\" fill=\"#333333\">{t}</text>")),
            "no y tick {t}"
        );
    }
    assert!(!svg.contains(">130</text>") && !svg.contains(">30</text>"));
}

#[test]
fn text_is_escaped() {
    let mut chart = LineChart::new("a < b & c > d", "x \"quoted\"", "y's");
    chart
        .series
        .push(Series::new("<script>&", vec![(0.0, 1.0), (1.0, 2.0)]));
    let svg = chart.to_svg();
    check_well_formed(&svg);
    assert!(svg.contains("a &lt; b &amp; c &gt; d"));
    assert!(svg.contains("&lt;script&gt;&amp;"));
    assert!(!svg.contains("<script"));
    let mut bars = BarChart::new("<&>", "y");
    bars.categories = vec!["R&D <core>".into()];
    bars.groups = vec![BarGroup::new("a&b", vec![1.0])];
    let svg = bars.to_svg();
    check_well_formed(&svg);
    assert!(svg.contains("R&amp;D &lt;core&gt;") && svg.contains("a&amp;b"));
}

#[test]
fn nan_and_infinite_points_are_skipped() {
    let mut chart = LineChart::new("nan", "x", "y");
    chart.series.push(Series::new(
        "mixed",
        vec![
            (0.0, 1.0),
            (f64::NAN, 5.0),
            (1.0, f64::INFINITY),
            (2.0, 3.0),
            (f64::NEG_INFINITY, 0.0),
        ],
    ));
    chart
        .series
        .push(Series::new("all-nan", vec![(f64::NAN, f64::NAN)]));
    let svg = chart.to_svg();
    check_well_formed(&svg);
    assert!(svg.contains(">mixed</text>") && svg.contains(">all-nan (no data)</text>"));
    // Two finite points: one two-point line and a marker on each.
    assert_eq!(svg.matches("<circle").count(), 2);
    assert!(
        !svg.contains("no data</text>\n</svg>"),
        "chart with data must not say no data"
    );
}

#[test]
fn empty_inputs_render_no_data() {
    let cases: Vec<(String, &str)> = vec![
        (LineChart::default().to_svg(), ""),
        (LineChart::new("Empty", "x", "y").to_svg(), "Empty"),
        (
            {
                let mut c = LineChart::new("Empty series", "x", "y");
                c.series = vec![Series::new("fifo", vec![]), Series::new("fair", vec![])];
                c.step = true;
                c.x_log = true;
                c.to_svg()
            },
            "fifo (no data)",
        ),
        (BarChart::default().to_svg(), ""),
        (
            {
                let mut b = BarChart::new("No values", "y");
                b.categories = vec!["a".into()];
                b.groups = vec![
                    BarGroup::new("g", vec![f64::NAN]),
                    BarGroup::new("h", vec![]),
                ];
                b.to_svg()
            },
            ">g</text>",
        ),
        (
            {
                let mut b = BarChart::new("Groups without categories", "y");
                b.groups = vec![BarGroup::new("g", vec![1.0])];
                b.to_svg()
            },
            ">g</text>",
        ),
    ];
    for (svg, needle) in &cases {
        check_well_formed(svg);
        assert!(svg.contains(">no data</text>"), "{svg}");
        assert!(svg.contains(needle));
    }
}

#[test]
fn degenerate_inputs_do_not_panic() {
    let mut chart = LineChart::new("flat", "x", "y");
    chart
        .series
        .push(Series::new("one point", vec![(5.0, 5.0)]));
    chart
        .series
        .push(Series::new("huge", vec![(0.0, 1e300), (1.0, -1e300)]));
    chart.x_range = Some((3.0, 3.0));
    chart.y_range = Some((f64::NAN, 1.0));
    check_well_formed(&chart.to_svg());
    chart.x_log = true;
    chart.x_range = Some((-5.0, 0.0));
    check_well_formed(&chart.to_svg_sized(1, 1));
    let mut bars = BarChart::new("negative", "delta");
    bars.categories = (0..60).map(|i| format!("account-{i}")).collect();
    bars.groups = vec![BarGroup::new(
        "a",
        (0..60).map(|i| i as f64 - 30.0).collect(),
    )];
    check_well_formed(&bars.to_svg());
    let many: Vec<Series> = (0..40)
        .map(|i| Series::new(format!("series number {i}"), vec![(0.0, i as f64)]))
        .collect();
    let mut crowded = LineChart::new("crowded", "x", "y");
    crowded.series = many;
    let svg = crowded.to_svg();
    check_well_formed(&svg);
    assert!(svg.contains("more</text>"));
}

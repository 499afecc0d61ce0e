//! The figure: MDSR and RDA by round, one line per variant (main study, all settings, mean over
//! star / chain / tree / random), stamped with the agent, seed, git revision and wall time.
//! Fonts: DejaVu Sans registered as "sans-serif" (no system fonts needed).

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

use super::report::LifecycleReport;
use crate::BenchError;

/// Line colours, one per variant (report order).
const COLOURS: [RGBColor; 11] = [
    RGBColor(0, 0, 0),
    RGBColor(230, 97, 1),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
];

fn register_font() -> Result<(), BenchError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular()).is_ok()
            && plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold()).is_ok()
    });
    if ok { Ok(()) } else { Err(BenchError::Io("cannot register the DejaVu font".into())) }
}

fn io<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Io(format!("figure: {e}"))
}

/// Draw `lifecycle.png` at `path`.
pub fn draw(report: &LifecycleReport, path: &Path) -> Result<(), BenchError> {
    register_font()?;
    let root = BitMapBackend::new(path, (1500, 720)).into_drawing_area();
    root.fill(&WHITE).map_err(io)?;
    let (head, body) = root.split_vertically(70);
    let title = format!(
        "memwarden bench lifecycle — MDSR and RDA by round per variant ({} run; all settings, mean over star/chain/tree/random)",
        if report.quick { "quick" } else { "full" }
    );
    head.draw_text(&title, &("sans-serif", 22).into_font().style(FontStyle::Bold).color(&BLACK), (20, 10)).map_err(io)?;
    let stamp = format!(
        "agent: {}   seed: {}   git: {}   wall time: {:.1} s",
        report.agent,
        report.seed,
        report.git_rev.as_deref().unwrap_or("unknown"),
        report.wall_time_s
    );
    let stamp: String = stamp.chars().take(190).collect();
    head.draw_text(&stamp, &("sans-serif", 15).into_font().color(&RGBColor(60, 60, 60)), (20, 42)).map_err(io)?;
    let panels = body.split_evenly((1, 2));
    let rows: Vec<_> = report.table5.iter().filter(|t| t.setting == "all").collect();
    let rounds = rows.iter().map(|r| r.mdsr_by_round.len()).max().unwrap_or(3).max(1);
    for (p, (name, pick)) in panels.iter().zip([
        ("MDSR@r (%) ↑ — tasks meeting the correct-output threshold", true),
        ("RDA@r (%) ↓ — outputs with poison in context that failed", false),
    ]) {
        let mut chart = ChartBuilder::on(p)
            .caption(name, ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0.8f64..(rounds as f64 + 0.2), 0f64..100f64)
            .map_err(io)?;
        chart
            .configure_mesh()
            .x_labels(rounds)
            .x_label_formatter(&|x| format!("round {}", x.round()))
            .y_labels(11)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(io)?;
        for (k, row) in rows.iter().enumerate() {
            let colour = COLOURS.get(k % COLOURS.len()).copied().unwrap_or(BLACK);
            let series = if pick { &row.mdsr_by_round } else { &row.rda_by_round };
            let pts: Vec<(f64, f64)> = series.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i as f64 + 1.0, v))).collect();
            if pts.is_empty() {
                continue;
            }
            let width = if matches!(row.variant.as_str(), "none" | "retrieval_only" | "lifecycle" | "full") { 3 } else { 1 };
            chart
                .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(width)))
                .map_err(io)?
                .label(row.variant.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], colour.stroke_width(3)));
            chart.draw_series(pts.iter().map(|pt| Circle::new(*pt, 4, colour.filled()))).map_err(io)?;
        }
        chart
            .configure_series_labels()
            .position(if pick { SeriesLabelPosition::LowerLeft } else { SeriesLabelPosition::UpperLeft })
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(io)?;
    }
    root.present().map_err(io)?;
    Ok(())
}

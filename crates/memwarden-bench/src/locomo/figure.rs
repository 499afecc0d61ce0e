//! The figure: evidence recall@k (any-of, k = 1..10, categories 1-4) per preset, benign and
//! under attack, stamped with the embedder, git revision, date and wall time.
//! Fonts: DejaVu Sans registered as "sans-serif" (no system fonts needed).

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

use super::report::LocomoReport;
use crate::BenchError;

const COLOURS: [RGBColor; 5] = [RGBColor(0, 0, 0), RGBColor(31, 119, 180), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(148, 103, 189)];

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

/// Draw `locomo.png` at `path`.
pub fn draw(report: &LocomoReport, path: &Path) -> Result<(), BenchError> {
    register_font()?;
    let root = BitMapBackend::new(path, (1400, 680)).into_drawing_area();
    root.fill(&WHITE).map_err(io)?;
    let (head, body) = root.split_vertically(70);
    let convs: Vec<&str> = report.conversations.iter().map(|c| c.id.as_str()).collect();
    let title = format!(
        "memwarden bench locomo — evidence recall@k per preset, categories 1-4 ({} run; conversations {})",
        if report.meta.quick { "quick" } else { "full" },
        convs.join(", ")
    );
    head.draw_text(&title, &("sans-serif", 22).into_font().style(FontStyle::Bold).color(&BLACK), (20, 10)).map_err(io)?;
    let stamp = format!(
        "embedder: {}   search: {}   git: {}   date: {}   wall time: {:.1} s",
        report.meta.embedder,
        report.meta.search.as_str(),
        report.meta.git_rev.as_deref().unwrap_or("unknown"),
        report.meta.date_utc,
        report.meta.wall_time_s
    );
    let stamp: String = stamp.chars().take(190).collect();
    head.draw_text(&stamp, &("sans-serif", 15).into_font().color(&RGBColor(60, 60, 60)), (20, 42)).map_err(io)?;
    let panels = body.split_evenly((1, 2));
    let benign: Vec<(String, Vec<f64>)> = report.benign.iter().map(|b| (b.preset.as_str().to_owned(), b.overall.recall_any_curve.clone())).collect();
    let attacked: Vec<(String, Vec<f64>)> = report.attack.iter().map(|a| (a.preset.as_str().to_owned(), a.overall.recall_any_curve.clone())).collect();
    for (p, (name, rows)) in panels.iter().zip([("benign conversations", &benign), ("under attack (poison injected by a source)", &attacked)]) {
        let mut chart = ChartBuilder::on(p)
            .caption(format!("evidence recall@k (%) — {name}"), ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0.8f64..10.2f64, 0f64..100f64)
            .map_err(io)?;
        chart
            .configure_mesh()
            .x_labels(10)
            .x_label_formatter(&|x| format!("k={}", x.round()))
            .y_labels(11)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(io)?;
        for (i, (preset, curve)) in rows.iter().enumerate() {
            let colour = COLOURS.get(i % COLOURS.len()).copied().unwrap_or(BLACK);
            let pts: Vec<(f64, f64)> = curve.iter().enumerate().map(|(k, v)| (k as f64 + 1.0, *v)).collect();
            if pts.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(3)))
                .map_err(io)?
                .label(preset.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], colour.stroke_width(3)));
            chart.draw_series(pts.iter().map(|pt| Circle::new(*pt, 4, colour.filled()))).map_err(io)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(io)?;
    }
    root.present().map_err(io)?;
    Ok(())
}

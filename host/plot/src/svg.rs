//! The SVG text itself: a small writer for the handful of elements the charts use
//! (rect, line, polyline, circle, text, a clipping viewport), XML escaping, coordinate
//! formatting, the colour palette and text-width estimates.
//!
//! Owns: well-formedness (every element closed, all text escaped, no ids that could
//! clash when several charts are inlined in one HTML page) and the visual constants.
//! Does not own: where anything goes (`frame`, `line`, `bar`).

/// The series colours, in order: the Okabe–Ito palette, distinguishable with the
/// common forms of colour blindness, yellow last since it is faint on white.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000", "#F0E442",
];

/// Dash patterns cycled once the palette has been used up (series 9–16 dashed, 17–24
/// dotted, …), so even many series stay distinguishable.
const DASHES: [Option<&str>; 3] = [None, Some("8 4"), Some("2 3")];

/// Colour of the `i`th series (cycles through [`PALETTE`]).
pub fn series_color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Dash pattern of the `i`th series' line: none for the first eight.
pub(crate) fn series_dash(i: usize) -> Option<&'static str> {
    DASHES[(i / PALETTE.len()) % DASHES.len()]
}

/// Font stack: the platform's UI font, DejaVu Sans on bare Linux.
const FONT: &str =
    "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', Helvetica, Arial, sans-serif";
/// Colour of text other than the title.
pub(crate) const INK: &str = "#333333";
/// Colour of gridlines.
pub(crate) const GRID: &str = "#e4e4e4";
/// Colour of axis lines.
pub(crate) const AXIS: &str = "#555555";
/// Pixel coordinates are clamped to this magnitude so absurd data cannot produce
/// numbers a renderer chokes on.
const COORD_LIMIT: f64 = 1e6;

/// Escapes text for use in XML content or a double-quoted attribute, dropping control
/// characters XML 1.0 does not allow.
pub(crate) fn escape_xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// A pixel coordinate with at most one decimal.
fn c(v: f64) -> String {
    let v = if v.is_finite() {
        v.clamp(-COORD_LIMIT, COORD_LIMIT)
    } else {
        0.0
    };
    let s = format!("{v:.1}");
    let s = s.strip_suffix(".0").unwrap_or(&s);
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// Approximate rendered width of `s` at font size `size`, from per-character widths
/// typical of sans-serif fonts. Used for margins and wrapping, never for exact fits.
pub(crate) fn text_width(s: &str, size: f64) -> f64 {
    let em: f64 = s
        .chars()
        .map(|ch| match ch {
            'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | ' ' | 'I' | 'f' | 't'
            | 'r' => 0.3,
            'm' | 'w' | 'M' | 'W' | '%' | '@' => 0.85,
            c if c.is_ascii_uppercase() => 0.68,
            _ => 0.57,
        })
        .sum();
    em * size
}

/// Horizontal alignment of a text label relative to its anchor point.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Anchor {
    /// Text starts at the point.
    Start,
    /// Text is centred on the point.
    Middle,
    /// Text ends at the point.
    End,
}

/// How a text label looks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TextStyle {
    /// Font size in pixels.
    pub size: f64,
    /// Alignment.
    pub anchor: Anchor,
    /// Bold or normal weight.
    pub bold: bool,
    /// Fill colour.
    pub fill: &'static str,
    /// Rotation in degrees about the anchor point (negative: counter-clockwise).
    pub rotate: f64,
}

impl TextStyle {
    /// Normal-weight text in the ink colour.
    pub fn new(size: f64, anchor: Anchor) -> TextStyle {
        TextStyle {
            size,
            anchor,
            bold: false,
            fill: INK,
            rotate: 0.0,
        }
    }
}

/// An SVG document being written.
pub(crate) struct Svg {
    out: String,
}

impl Svg {
    /// Starts a `width`×`height` document with a viewBox (so it scales), an
    /// accessible `<title>` and a white background.
    pub fn new(width: f64, height: f64, title: &str) -> Svg {
        let (w, h) = (c(width), c(height));
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
             role=\"img\" font-family=\"{FONT}\">\n"
        );
        out.push_str(&format!("<title>{}</title>\n", escape_xml(title)));
        out.push_str(&format!(
            "<rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\n"
        ));
        Svg { out }
    }

    /// A straight line.
    pub fn line(&mut self, from: (f64, f64), to: (f64, f64), stroke: &str, width: f64) {
        self.out.push_str(&format!(
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{stroke}\" stroke-width=\"{}\"/>\n",
            c(from.0),
            c(from.1),
            c(to.0),
            c(to.1),
            c(width)
        ));
    }

    /// A filled rectangle, with a hover tooltip when `tooltip` is given.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tooltip: Option<&str>) {
        let head = format!(
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\"",
            c(x),
            c(y),
            c(w.max(0.0)),
            c(h.max(0.0))
        );
        self.out.push_str(&head);
        self.close_with_tooltip("rect", tooltip);
    }

    /// A filled circle.
    pub fn circle(&mut self, cx: f64, cy: f64, r: f64, fill: &str) {
        self.out.push_str(&format!(
            "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{fill}\"/>\n",
            c(cx),
            c(cy),
            c(r)
        ));
    }

    /// An unfilled polyline through `points` (pixel coordinates).
    pub fn polyline(
        &mut self,
        points: &[(f64, f64)],
        stroke: &str,
        dash: Option<&str>,
        tooltip: Option<&str>,
    ) {
        let coords: Vec<String> = points
            .iter()
            .map(|&(x, y)| format!("{},{}", c(x), c(y)))
            .collect();
        self.out.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"2\" \
             stroke-linejoin=\"round\" stroke-linecap=\"round\"",
            coords.join(" ")
        ));
        if let Some(d) = dash {
            self.out.push_str(&format!(" stroke-dasharray=\"{d}\""));
        }
        self.close_with_tooltip("polyline", tooltip);
    }

    /// A text label whose baseline starts, is centred or ends at (`x`, `y`).
    pub fn text(&mut self, x: f64, y: f64, s: &str, style: TextStyle) {
        let anchor = match style.anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        let (x, y) = (c(x), c(y));
        self.out.push_str(&format!(
            "<text x=\"{x}\" y=\"{y}\" font-size=\"{}\" text-anchor=\"{anchor}\" fill=\"{}\"",
            c(style.size),
            style.fill
        ));
        if style.bold {
            self.out.push_str(" font-weight=\"bold\"");
        }
        if style.rotate != 0.0 {
            self.out.push_str(&format!(
                " transform=\"rotate({} {x} {y})\"",
                c(style.rotate)
            ));
        }
        self.out.push_str(&format!(">{}</text>\n", escape_xml(s)));
    }

    /// Starts a viewport that clips what is drawn inside it to the given rectangle
    /// while keeping the document's coordinates (a nested `<svg>`, which needs no id).
    pub fn open_clip(&mut self, x: f64, y: f64, w: f64, h: f64) {
        let (x, y, w, h) = (c(x), c(y), c(w.max(0.0)), c(h.max(0.0)));
        self.out.push_str(&format!(
            "<svg x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" viewBox=\"{x} {y} {w} {h}\" overflow=\"hidden\">\n"
        ));
    }

    /// Ends the viewport started by [`Svg::open_clip`].
    pub fn close_clip(&mut self) {
        self.out.push_str("</svg>\n");
    }

    /// The finished document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }

    fn close_with_tooltip(&mut self, element: &str, tooltip: Option<&str>) {
        match tooltip {
            Some(t) => self
                .out
                .push_str(&format!("><title>{}</title></{element}>\n", escape_xml(t))),
            None => self.out.push_str("/>\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            escape_xml("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;"
        );
        assert_eq!(escape_xml("bell\u{7}\nnext"), "bell next");
    }

    #[test]
    fn coordinates() {
        assert_eq!(c(12.04), "12");
        assert_eq!(c(-0.01), "0");
        assert_eq!(c(3.26), "3.3");
        assert_eq!(c(1e300), "1000000");
        assert_eq!(c(f64::NAN), "0");
    }

    #[test]
    fn palette_and_dashes() {
        assert_eq!(series_color(0), series_color(8));
        assert_eq!(series_dash(0), None);
        assert!(series_dash(8).is_some() && series_dash(8) != series_dash(16));
        assert!(text_width("WWW", 10.0) > text_width("iii", 10.0));
    }
}

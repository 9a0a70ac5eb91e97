//! Reading one metric out of a Prometheus text exposition: the samples named exactly so,
//! whatever their labels, added (for vLLM one per model). Comments, other metrics and
//! values that are not finite numbers are skipped; nothing in the text is trusted.
//!
//! Owns: that parse. Does not own fetching the text (`mod.rs`).

/// The sum of the samples of `metric` in `text`, or `None` when it has none.
pub fn sum_of(text: &str, metric: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        let after_labels = if let Some(labels) = rest.strip_prefix('{') {
            match end_of_labels(labels) {
                Some(end) => &labels[end + 1..],
                None => continue,
            }
        } else if rest.starts_with([' ', '\t']) {
            rest
        } else {
            // Another metric whose name begins with this one.
            continue;
        };
        let Some(value) = after_labels
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite())
        else {
            continue;
        };
        *found.get_or_insert(0.0) += value;
    }
    found
}

/// The index of the `}` that closes a label set (quotes and escapes respected).
fn end_of_labels(s: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::sum_of;

    #[test]
    fn adds_every_label_set_of_the_metric_only() {
        let text = "# HELP vllm:num_requests_waiting waiting\n\
            # TYPE vllm:num_requests_waiting gauge\n\
            vllm:num_requests_waiting{model_name=\"a} b\"} 3.0\n\
            vllm:num_requests_waiting{model_name=\"c\"} 2 1700000000\n\
            vllm:num_requests_waiting_total 100\n\
            vllm:num_requests_running 9\n";
        assert_eq!(sum_of(text, "vllm:num_requests_waiting"), Some(5.0));
        assert_eq!(sum_of("queue 4\n", "queue"), Some(4.0));
        assert_eq!(sum_of("queue NaN\nqueue{a=\"1\"} +Inf\n", "queue"), None);
        assert_eq!(sum_of("queue{a=\"unterminated 3\n", "queue"), None);
        assert_eq!(sum_of("", "queue"), None);
    }
}

// A virtualised list: rows of one fixed height; only the rows in view (plus a margin)
// exist in the DOM, so 10,000 jobs or 1,000 nodes cost a few dozen elements.

export class VirtualList {
  /**
   * @param {number} rowHeight pixels per row (must match the CSS).
   * @param {(item: any) => HTMLElement} renderRow
   * @param {string} height CSS height of the scrolling box.
   */
  constructor(rowHeight, renderRow, height = "60vh") {
    this.rowHeight = rowHeight;
    this.renderRow = renderRow;
    this.items = [];
    this.el = document.createElement("div");
    this.el.className = "vlist";
    this.el.style.maxHeight = height;
    this.inner = document.createElement("div");
    this.inner.className = "vlist-inner";
    this.rows = document.createElement("div");
    this.rows.className = "vlist-rows";
    this.inner.append(this.rows);
    this.el.append(this.inner);
    this.first = -1;
    this.last = -1;
    this.el.addEventListener("scroll", () => this.draw(false), { passive: true });
    new ResizeObserver(() => this.draw(false)).observe(this.el);
  }

  /** New items (the scroll position is kept). */
  set(items) {
    this.items = items;
    this.inner.style.height = `${items.length * this.rowHeight}px`;
    this.draw(true);
  }

  draw(force) {
    const view = this.el.clientHeight || 600;
    const margin = 8;
    const first = Math.max(0, Math.floor(this.el.scrollTop / this.rowHeight) - margin);
    const last = Math.min(this.items.length, Math.ceil((this.el.scrollTop + view) / this.rowHeight) + margin);
    if (!force && first === this.first && last === this.last) return;
    this.first = first;
    this.last = last;
    this.rows.style.top = `${first * this.rowHeight}px`;
    const out = [];
    for (let i = first; i < last; i++) out.push(this.renderRow(this.items[i], i));
    this.rows.replaceChildren(...out);
  }
}

/*
 * svg.c — a picture of the memory plan: time (kernel index) across,
 * offset up, one box per buffer labelled with its tensor where the name
 * fits, one band per pool, the lower bound as a dashed line and the live
 * total per kernel as a step line. Self-contained SVG 1.1 (no scripts).
 */
#include <stdint.h>
#include <string.h>

#include "kernelplan/plan-impl.h"

static void xml_escaped(FILE *out, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*s, out);
        }
    }
}

static unsigned name_hash(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void human(char *buf, size_t n, int64_t b) {
    if (b >= (int64_t)1 << 20) snprintf(buf, n, "%.2f MiB", (double)b / (1 << 20));
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024);
    else snprintf(buf, n, "%lld B", (long long)b);
}

static int64_t aligned(int64_t x, int64_t a) { return a > 1 ? (x + a - 1) / a * a : x; }

bool mcir_memplan_write_svg(const mcir_memplan *m, const mcir_plan *p, FILE *out) {
    const double left = 90, right = 20, top = 56, bottom = 44, plot_w = 860, band_gap = 28;
    const double plot_h = 440;
    int nk = m->n_kernels > 0 ? m->n_kernels : 1;
    double xs = plot_w / nk;
    int64_t total = 0;
    for (int i = 0; i < m->n_pools; i++) total += m->pool_bytes[i] > 0 ? m->pool_bytes[i] : 1;
    double ys = plot_h / (double)(total > 0 ? total : 1);
    double width = left + plot_w + right;
    double height = top + plot_h + band_gap * (m->n_pools - 1) + bottom;
    char a[32], lb[32];
    human(a, sizeof a, m->arena_bytes);
    human(lb, sizeof lb, m->lower_bound_bytes);

    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\">\n",
            width, height, width, height);
    fprintf(out, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(out, "<text x=\"%.0f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">", left);
    xml_escaped(out, p && p->graph && p->graph->name ? p->graph->name : "graph");
    fprintf(out, ": arena %s (%lld B), lower bound %s (%lld B), %.3fx</text>\n", a,
            (long long)m->arena_bytes, lb, (long long)m->lower_bound_bytes,
            m->lower_bound_bytes ? (double)m->arena_bytes / (double)m->lower_bound_bytes : 1.0);
    fprintf(out, "<text x=\"%.0f\" y=\"40\" font-size=\"11\" fill=\"#444\">planner ", left);
    xml_escaped(out, m->planner);
    fprintf(out, " (kept: ");
    xml_escaped(out, m->algorithm ? m->algorithm : "?");
    fprintf(out, "%s), %d buffers, %d kernels, alignment %lld B; x: kernel index, y: offset"
                 "</text>\n", m->optimal ? ", optimal" : "", m->n_buffers, m->n_kernels,
            (long long)m->alignment);

    double band_top = top;
    for (int pi = 0; pi < m->n_pools; pi++) {
        int64_t pb = m->pool_bytes[pi] > 0 ? m->pool_bytes[pi] : 1;
        double bh = (double)pb * ys;
        double base = band_top + bh;     /* offset 0 at the bottom of the band */
        fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f6f6f6\" "
                     "stroke=\"#999\"/>\n", left, band_top, plot_w, bh);
        /* y axis: the pool's name and a few offsets */
        fprintf(out, "<text x=\"4\" y=\"%.1f\" font-size=\"11\" font-weight=\"bold\">", band_top + 10);
        xml_escaped(out, m->pool_names[pi]);
        fprintf(out, "</text>\n");
        for (int t = 0; t <= 4; t++) {
            int64_t off = pb * t / 4;
            double y = base - (double)off * ys;
            char h[32];
            human(h, sizeof h, off);
            fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#bbb\"/>\n",
                    left - 4, y, left, y);
            if (bh > 60 || t == 0 || t == 4)
                fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%s"
                             "</text>\n", left - 6, y + 3, h);
        }
        /* one box per buffer */
        for (int i = 0; i < m->n_buffers; i++) {
            const mcir_buffer_plan *b = &m->buffers[i];
            if (b->pool != pi) continue;
            double x = left + b->first * xs, w = (b->last - b->first + 1) * xs;
            double y = base - (double)(b->offset + b->size) * ys, h = (double)b->size * ys;
            if (h < 0.5) h = 0.5;
            unsigned hue = name_hash(b->name) % 360;
            fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                         "fill=\"hsl(%u,60%%,%d%%)\" stroke=\"#333\" stroke-width=\"0.6\">"
                         "<title>", x, y, w, h, hue, b->tensor ? 72 : 85);
            xml_escaped(out, b->name);
            fprintf(out, ": %lld B at %lld, kernels %d..%d%s</title></rect>\n",
                    (long long)b->size, (long long)b->offset, b->first, b->last,
                    b->share_with >= 0 ? " (in place)" : "");
            /* the name without a ".y" suffix, else its tail after a '.'
             * ("c_fc.bias_add"), if it fits */
            char label[128];
            snprintf(label, sizeof label, "%s", b->name);
            size_t len = strlen(label);
            if (len > 2 && !strcmp(label + len - 2, ".y")) label[len - 2] = 0;
            const char *shown = label;
            while (shown && w < 5.6 * (double)strlen(shown) + 4) {
                const char *dot = strchr(shown, '.');
                shown = dot && dot[1] ? dot + 1 : NULL;
            }
            if (shown && h >= 11) {
                fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"9.5\" text-anchor=\"middle\">",
                        x + w / 2, y + h / 2 + 3.5);
                xml_escaped(out, shown);
                fprintf(out, "</text>\n");
            }
        }
        /* live total per kernel (aligned sizes) as a step line */
        fprintf(out, "<polyline fill=\"none\" stroke=\"#c00\" stroke-width=\"1.2\" points=\"");
        for (int k = 0; k < m->n_kernels; k++) {
            int64_t live = 0;
            for (int i = 0; i < m->n_buffers; i++) {
                const mcir_buffer_plan *b = &m->buffers[i];
                if (b->pool == pi && b->first <= k && k <= b->last && b->share_with < 0)
                    live += aligned(b->size, m->alignment);
            }
            double y = base - (double)live * ys;
            fprintf(out, "%.2f,%.2f %.2f,%.2f ", left + k * xs, y, left + (k + 1) * xs, y);
        }
        fprintf(out, "\"/>\n");
        if (m->n_pools == 1) {
            double y = base - (double)m->lower_bound_bytes * ys;
            fprintf(out, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#c00\" "
                         "stroke-dasharray=\"6 4\"/>\n", left, y, left + plot_w, y);
            fprintf(out, "<text x=\"%.1f\" y=\"%.2f\" font-size=\"10\" fill=\"#c00\" "
                         "text-anchor=\"end\">lower bound</text>\n", left + plot_w - 2, y - 3);
        }
        band_top = base + band_gap;
    }
    /* x axis: kernel indices */
    double axis_y = band_top - band_gap + 14;
    int step = nk <= 25 ? 1 : (nk + 24) / 25;
    for (int k = 0; k < m->n_kernels; k += step)
        fprintf(out, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\">%d</text>\n",
                left + (k + 0.5) * xs, axis_y, k);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">kernel "
                 "(execution order)</text>\n", left + plot_w / 2, axis_y + 16);
    fprintf(out, "</svg>\n");
    return !ferror(out);
}

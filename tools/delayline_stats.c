/*
 * delayline_stats.c - the JSON object of mln-delayline's counters, written to stdout at exit
 * and on SIGUSR1, and to --stats.  The test bed reads it (multilane testbed, link_stats); it is
 * here, apart from the sockets, so that the unit test can check it.
 */
#include "delayline_core.h"
#include "multilane_base.h"

#include <stdio.h>

const char *const dl_dir_name[DL_NDIRS] = {"ab", "ba"};

static void json_dir(FILE *fp, const dl_dir_t *d)
{
    const dl_counters_t *c = &d->ctr;
    const dl_dir_params_t *p = &d->prm;
    fprintf(fp,
            "{\"rx_frames\":%llu,\"rx_bytes\":%llu,\"tx_frames\":%llu,\"tx_bytes\":%llu,"
            "\"drop_loss\":%llu,\"drop_queue\":%llu,\"drop_flow\":%llu,\"drop_error\":%llu,"
            "\"drop_nobuf\":%llu,\"drop_kernel\":%llu,\"max_queue_bytes\":%llu,"
            "\"flow_evict_busy\":%llu,\"drop_blackhole\":%llu,"
            "\"params\":{\"delay_ns\":%llu,\"rate_bps\":%llu,\"loss\":%.9g,\"queue_bytes\":%llu,"
            "\"flow_rate_bps\":%llu,\"flow_queue_bytes\":%llu,\"seed\":%llu}}",
            (unsigned long long)c->rx_frames, (unsigned long long)c->rx_bytes,
            (unsigned long long)c->tx_frames, (unsigned long long)c->tx_bytes,
            (unsigned long long)c->drop_loss, (unsigned long long)c->drop_queue,
            (unsigned long long)c->drop_flow, (unsigned long long)c->drop_error,
            (unsigned long long)c->drop_nobuf, (unsigned long long)c->drop_kernel,
            (unsigned long long)c->max_queue_bytes, (unsigned long long)c->flow_evict_busy,
            (unsigned long long)c->drop_blackhole, (unsigned long long)p->delay_ns,
            (unsigned long long)p->rate_bps, p->loss, (unsigned long long)p->queue_bytes,
            (unsigned long long)p->flow_rate_bps, (unsigned long long)p->flow_queue_bytes,
            (unsigned long long)p->seed);
}

/* "blackhole":[...]: each rule, and once struck the flow it cut off. */
static void json_blackhole(FILE *fp, const dl_blackhole_t *bh)
{
    char flow[64];

    fputs(",\"blackhole\":[", fp);
    for (int i = 0; bh != NULL && i < bh->nrules; i++) {
        const dl_blackhole_rule_t *r = &bh->rule[i];
        fprintf(fp, "%s{\"port\":%u,\"after_bytes\":%llu,\"struck\":%s", i ? "," : "", r->spec.port,
                (unsigned long long)r->spec.after_bytes, r->struck ? "true" : "false");
        if (r->struck) {
            dl_flow_key_format(&r->flow, flow, sizeof(flow));
            fprintf(fp, ",\"flow\":\"%s\",\"flow_bytes\":%llu", flow,
                    (unsigned long long)r->flow_bytes);
        }
        fputc('}', fp);
    }
    fputc(']', fp);
}

void dl_stats_json(FILE *fp, const char *const ifname[DL_NDIRS], double uptime_s,
                   const dl_dir_t dir[DL_NDIRS], const dl_blackhole_t *bh)
{
    /* Linux allows '"' and '\' in interface names (dev_valid_name), and bytes that are not
     * UTF-8: they must not break the object. */
    fputs("{\"tool\":\"mln-delayline\",\"a\":", fp);
    mln_json_write_string(fp, ifname[0]);
    fputs(",\"b\":", fp);
    mln_json_write_string(fp, ifname[1]);
    fprintf(fp, ",\"uptime_s\":%.3f", uptime_s);
    for (int d = 0; d < DL_NDIRS; d++) {
        fprintf(fp, ",\"%s\":", dl_dir_name[d]);
        json_dir(fp, &dir[d]);
    }
    json_blackhole(fp, bh);
    fputs("}\n", fp);
}

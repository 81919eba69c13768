/*
 * link_job.c - the job's side of the link layer: the key travels from the root to every rank
 * over MPI (the trusted channel inside a job, docs/SECURITY.md), every rank's X25519 public key
 * to every rank, and the ranks agree on the mode and the cipher.
 */
#include "link_int.h"

#include "mln_core.h"

#include <mpi.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* The public job id: BLAKE2b of the key, so that a hello names its job without showing it. */
static void job_id(mln_link_job_t *j)
{
    static const char label[] = "multilane job id";

    crypto_generichash(j->id, sizeof(j->id), (const unsigned char *)label, sizeof(label), j->key,
                       sizeof(j->key));
}

mln_status_t mln_link_job_share(mln_link_job_t *j, const mln_config_t *cfg, void *mpi_comm)
{
    MPI_Comm comm = *(MPI_Comm *)mpi_comm;
    /* {mode and payload MAC, the cipher asked for, AES-GCM here}: min and max over the job */
    const int aes_here = crypto_aead_aes256gcm_is_available();
    int mine[3] = {j->mode * 2 + (j->payload_mac != 0), j->cipher, aes_here};
    int lo[3], hi[3], neg[3];

    for (int i = 0; i < 3; i++)
        neg[i] = -mine[i];
    int nranks = 0;

    if (MPI_Comm_size(comm, &nranks) != MPI_SUCCESS)
        return MLN_ERR_MPI;
    j->pks = malloc((size_t)nranks * sizeof(j->pk));
    j->nranks = nranks;
    if (j->pks == NULL) {
        MLN_ERROR("link: out of memory for %d public keys", nranks);
        return MLN_ERR_NOMEM; /* (every rank needs as much: they all fail alike) */
    }
    if (MPI_Allgather(j->pk, (int)sizeof(j->pk), MPI_BYTE, j->pks, (int)sizeof(j->pk), MPI_BYTE,
                      comm) != MPI_SUCCESS ||
        MPI_Allreduce(mine, lo, 3, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS ||
        MPI_Allreduce(neg, hi, 3, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS ||
        MPI_Bcast(j->key, (int)sizeof(j->key), MPI_BYTE, 0, comm) != MPI_SUCCESS) {
        MLN_ERROR("link: the job key could not be shared over MPI");
        return MLN_ERR_MPI;
    }
    if (lo[0] != -hi[0]) {
        MLN_ERROR("MLN_LINK_SECURITY (or MLN_LINK_PAYLOAD_MAC) differs between the ranks of this "
                  "job (here %s%s): set it the same for all",
                  mln_link_mode_name(j->mode), j->payload_mac ? " with the payload MAC" : "");
        return MLN_ERR_CONFIG;
    }
    if (lo[1] != -hi[1]) {
        MLN_ERROR("MLN_LINK_CIPHER differs between the ranks of this job (here %s): set it the "
                  "same for all",
                  mln_link_cipher_name(j->cipher));
        return MLN_ERR_CONFIG;
    }
    if (cfg->link_cipher == MLN_LINK_CIPHER_AES && lo[2] == 0) {
        MLN_ERROR("MLN_LINK_CIPHER=aes: %s has no AES-GCM in hardware (AES-NI and PCLMUL); "
                  "use chacha or auto",
                  aes_here ? "the CPU of another rank" : "this CPU");
        return MLN_ERR_CONFIG;
    }
    if (cfg->link_cipher == MLN_LINK_CIPHER_AUTO)
        j->cipher = lo[2] ? MLN_LINK_CIPHER_AES : MLN_LINK_CIPHER_CHACHA;
    job_id(j);
    MLN_DEBUG("link: mode %s, cipher %s%s", mln_link_mode_name(j->mode),
              mln_link_cipher_name(j->cipher), j->payload_mac ? ", payload MAC" : "");
    return MLN_OK;
}

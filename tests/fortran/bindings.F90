! One source, three programs (tests/fortran/CMakeLists.txt), one per Fortran binding of MPI,
! chosen by the preprocessor: MLN_MPIF_H (include 'mpif.h'), MLN_USE_MPI (use mpi) or
! MLN_USE_MPI_F08 (use mpi_f08: derived types for statuses and requests).  Only declarations
! and status fields differ; every call is the same text in all three.
!
! On 2 or more ranks, between ranks 0 and 1: MPI_Send/MPI_Recv of 4 MiB both ways,
! MPI_Isend/MPI_Irecv of 1 MiB both ways with MPI_Waitall, a persistent MPI_Send_init/
! MPI_Recv_init pair started twice, MPI_Probe + MPI_Get_count + MPI_Recv of 2 MiB the receiver
! does not know the size of; then MPI_Bcast of 4 MiB from rank 0 to all.  Every element and
! every receive's status (source, tag, MPI_Get_count) is checked; rank 0 prints PASS when no
! rank found an error, else FAIL, and the program exits 1.  An MPI call that fails aborts.
#if defined(MLN_USE_MPI_F08)
#define BINDING "use mpi_f08"
#define STATUS_T type(MPI_Status)
#define REQUEST_T type(MPI_Request)
#define STATUS_IN(array, i) array(i)
#define SOURCE_OF(st) st%MPI_SOURCE
#define TAG_OF(st) st%MPI_TAG
#else
#if defined(MLN_USE_MPI)
#define BINDING "use mpi"
#else
#define BINDING "include 'mpif.h'"
#endif
#define STATUS_T integer, dimension(MPI_STATUS_SIZE)
#define REQUEST_T integer
#define STATUS_IN(array, i) array(:, i)
#define SOURCE_OF(st) st(MPI_SOURCE)
#define TAG_OF(st) st(MPI_TAG)
#endif
program bindings
    use fcheck
#if defined(MLN_USE_MPI_F08)
    use mpi_f08
#elif defined(MLN_USE_MPI)
    use mpi
#endif
    implicit none
#if !defined(MLN_USE_MPI_F08) && !defined(MLN_USE_MPI)
    include 'mpif.h'
#endif

    integer :: rank, nranks, peer, ierr, errs, total, n, k
    STATUS_T :: st
#if defined(MLN_USE_MPI_F08)
    type(MPI_Status) :: sts(2)
#else
    integer :: sts(MPI_STATUS_SIZE, 2)
#endif
    REQUEST_T :: reqs(2), preq
    real(dp), allocatable :: big(:), back(:), bcast(:), unknown(:)
    real(dp), allocatable, asynchronous :: sbuf(:), rbuf(:)

    call MPI_Init(ierr)
    call check(ierr, 'MPI_Init')
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
    if (nranks < 2) then
        write (*, '(a)') 'FAIL: needs 2 or more ranks'
        call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
    end if
    errs = 0
    peer = 1 - rank

    if (rank <= 1) then
        ! 1. Blocking, 4 MiB each way: 0 -> 1 (tag 10), then 1 -> 0 (tag 11).
        n = mib_doubles(4)
        allocate (big(n), back(n))
        if (rank == 0) then
            call fill(big, 10)
            call MPI_Send(big, n, MPI_DOUBLE_PRECISION, 1, 10, MPI_COMM_WORLD, ierr)
            call check(ierr, 'MPI_Send')
            back = -1.0_dp
            call MPI_Recv(back, n, MPI_DOUBLE_PRECISION, 1, 11, MPI_COMM_WORLD, st, ierr)
            call check(ierr, 'MPI_Recv')
            call check_status('send/recv 1->0', st, 1, 11, n)
            errs = errs + wrong_elements(rank, 'send/recv 1->0', back, 11)
        else
            back = -1.0_dp
            call MPI_Recv(back, n, MPI_DOUBLE_PRECISION, 0, 10, MPI_COMM_WORLD, st, ierr)
            call check(ierr, 'MPI_Recv')
            call check_status('send/recv 0->1', st, 0, 10, n)
            errs = errs + wrong_elements(rank, 'send/recv 0->1', back, 10)
            call fill(big, 11)
            call MPI_Send(big, n, MPI_DOUBLE_PRECISION, 0, 11, MPI_COMM_WORLD, ierr)
            call check(ierr, 'MPI_Send')
        end if
        deallocate (big, back)

        ! 2. Nonblocking, 1 MiB both ways at once (tag 20, salt 20 + sender).
        n = mib_doubles(1)
        allocate (sbuf(n), rbuf(n))
        call fill(sbuf, 20 + rank)
        rbuf = -1.0_dp
        call MPI_Irecv(rbuf, n, MPI_DOUBLE_PRECISION, peer, 20, MPI_COMM_WORLD, reqs(1), ierr)
        call check(ierr, 'MPI_Irecv')
        call MPI_Isend(sbuf, n, MPI_DOUBLE_PRECISION, peer, 20, MPI_COMM_WORLD, reqs(2), ierr)
        call check(ierr, 'MPI_Isend')
        call MPI_Waitall(2, reqs, sts, ierr)
        call check(ierr, 'MPI_Waitall')
        call check_status('isend/irecv', STATUS_IN(sts, 1), peer, 20, n)
        errs = errs + wrong_elements(rank, 'isend/irecv', rbuf, 20 + peer)

        ! 3. Persistent, 1 MiB 0 -> 1 (tag 30), started twice with a new pattern each time.
        if (rank == 0) then
            call MPI_Send_init(sbuf, n, MPI_DOUBLE_PRECISION, 1, 30, MPI_COMM_WORLD, preq, ierr)
            call check(ierr, 'MPI_Send_init')
        else
            call MPI_Recv_init(rbuf, n, MPI_DOUBLE_PRECISION, 0, 30, MPI_COMM_WORLD, preq, ierr)
            call check(ierr, 'MPI_Recv_init')
        end if
        do k = 1, 2
            if (rank == 0) then
                call fill(sbuf, 30 + k)
            else
                rbuf = -1.0_dp
            end if
            call MPI_Start(preq, ierr)
            call check(ierr, 'MPI_Start')
            call MPI_Wait(preq, st, ierr)
            call check(ierr, 'MPI_Wait')
            if (rank == 1) then
                call check_status('persistent', st, 0, 30, n)
                errs = errs + wrong_elements(rank, 'persistent', rbuf, 30 + k)
            end if
        end do
        call MPI_Request_free(preq, ierr)
        call check(ierr, 'MPI_Request_free')
        deallocate (sbuf, rbuf)

        ! 4. A message of unknown size, 2 MiB 0 -> 1 (tag 40): probe, count, receive.
        if (rank == 0) then
            n = mib_doubles(2)
            allocate (big(n))
            call fill(big, 40)
            call MPI_Send(big, n, MPI_DOUBLE_PRECISION, 1, 40, MPI_COMM_WORLD, ierr)
            call check(ierr, 'MPI_Send')
            deallocate (big)
        else
            call MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st, ierr)
            call check(ierr, 'MPI_Probe')
            call check_status('probe', st, 0, 40, mib_doubles(2))
            call MPI_Get_count(st, MPI_DOUBLE_PRECISION, n, ierr)
            call check(ierr, 'MPI_Get_count')
            if (n < 0 .or. n > mib_doubles(64)) then
                write (*, '(a,i0)') 'rank 1: probe: unusable count ', n
                call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
            end if
            allocate (unknown(n))
            unknown = -1.0_dp
            call MPI_Recv(unknown, n, MPI_DOUBLE_PRECISION, SOURCE_OF(st), TAG_OF(st), &
                          MPI_COMM_WORLD, st, ierr)
            call check(ierr, 'MPI_Recv')
            call check_status('probed recv', st, 0, 40, mib_doubles(2))
            errs = errs + wrong_elements(rank, 'probed recv', unknown, 40)
            deallocate (unknown)
        end if
    end if

    ! 5. Broadcast, 4 MiB from rank 0 to every rank.
    n = mib_doubles(4)
    allocate (bcast(n))
    if (rank == 0) then
        call fill(bcast, 50)
    else
        bcast = -1.0_dp
    end if
    call MPI_Bcast(bcast, n, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
    call check(ierr, 'MPI_Bcast')
    errs = errs + wrong_elements(rank, 'bcast', bcast, 50)
    deallocate (bcast)

    call MPI_Allreduce(errs, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check(ierr, 'MPI_Allreduce')
    if (rank == 0) then
        if (total == 0) then
            write (*, '(3a,i0,a)') 'PASS (', BINDING, ', ', nranks, ' ranks)'
        else
            write (*, '(a,i0,a)') 'FAIL: ', total, ' errors'
        end if
    end if
    call MPI_Finalize(ierr)
    if (total /= 0) stop 1

contains

    subroutine check(code, call_name)
        integer, intent(in) :: code
        character(len=*), intent(in) :: call_name
        integer :: ignored
        if (code /= MPI_SUCCESS) then
            write (*, '(a,i0,3a,i0)') 'FAIL: rank ', rank, ': ', call_name, ' returned ', code
            call MPI_Abort(MPI_COMM_WORLD, 1, ignored)
        end if
    end subroutine check

    ! A receive's status: its source, tag and element count.
    subroutine check_status(what, status, source, tag, count)
        character(len=*), intent(in) :: what
        STATUS_T, intent(in) :: status
        integer, intent(in) :: source, tag, count
        integer :: got, code
        errs = errs + expect(rank, what//': status source', SOURCE_OF(status), source)
        errs = errs + expect(rank, what//': status tag', TAG_OF(status), tag)
        call MPI_Get_count(status, MPI_DOUBLE_PRECISION, got, code)
        call check(code, 'MPI_Get_count')
        errs = errs + expect(rank, what//': MPI_Get_count', got, count)
    end subroutine check_status

end program bindings

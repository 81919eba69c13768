! fcheck: the data pattern and checks the Fortran tests share (no MPI in here, so that one
! module serves the mpif.h, `use mpi` and `use mpi_f08` programs alike).
!
! Element i of a buffer filled with salt s holds value(i, s): a whole number plus 0.5, exact in
! real(8), different for each neighbouring element and each salt, so a shifted, truncated,
! stale or mixed-up buffer shows up in the count of wrong elements.
module fcheck
    implicit none
    private
    public :: dp, mib_doubles, fill, wrong_elements, expect

    integer, parameter :: dp = kind(1.0d0)
    integer, parameter :: prime = 1048573

contains

    ! Elements of real(8) in `mib` MiB.
    pure integer function mib_doubles(mib)
        integer, intent(in) :: mib
        mib_doubles = mib * 1048576 / 8
    end function mib_doubles

    pure real(dp) function value(i, salt)
        integer, intent(in) :: i, salt
        value = real(mod(7 * i + 104729 * salt, prime), dp) + 0.5_dp
    end function value

    subroutine fill(buf, salt)
        real(dp), intent(out) :: buf(:)
        integer, intent(in) :: salt
        integer :: i
        do i = 1, size(buf)
            buf(i) = value(i, salt)
        end do
    end subroutine fill

    ! Elements of buf that do not hold the pattern of `salt`; the first one is printed.
    integer function wrong_elements(rank, what, buf, salt) result(wrong)
        integer, intent(in) :: rank, salt
        character(len=*), intent(in) :: what
        real(dp), intent(in) :: buf(:)
        integer :: i
        wrong = 0
        do i = 1, size(buf)
            if (buf(i) /= value(i, salt)) then
                if (wrong == 0) then
                    write (*, '(a,i0,3a,i0,a,f0.1,a,f0.1)') 'rank ', rank, ': ', what, &
                        ': element ', i, ' is ', buf(i), ', expected ', value(i, salt)
                end if
                wrong = wrong + 1
            end if
        end do
        if (wrong > 0) then
            write (*, '(a,i0,3a,i0,a,i0,a)') 'rank ', rank, ': ', what, ': ', wrong, ' of ', &
                size(buf), ' elements wrong'
        end if
    end function wrong_elements

    ! 0 when got == want, else 1 and one line saying what differs.
    integer function expect(rank, what, got, want)
        integer, intent(in) :: rank, got, want
        character(len=*), intent(in) :: what
        expect = 0
        if (got /= want) then
            write (*, '(a,i0,3a,i0,a,i0)') 'rank ', rank, ': ', what, ' is ', got, &
                ', expected ', want
            expect = 1
        end if
    end function expect

end module fcheck

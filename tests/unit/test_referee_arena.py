"""How a runner's device arena is sized when its pool is made again (``referee.arena_size``):
one that fits is used again; an outgrown one is kept (a runner need not unmap it), so a new
one at least doubles where the device has room."""

from cudal1_evaluator.trusted.referee import arena_size

GB = 1 << 30


def test_a_first_arena_is_the_size_needed() -> None:
    assert arena_size(3 * GB, None, 100 * GB) == 3 * GB


def test_an_arena_that_fits_is_used_again() -> None:
    assert arena_size(2 * GB, 3 * GB, 100 * GB) is None
    assert arena_size(3 * GB, 3 * GB, 100 * GB) is None


def test_an_outgrown_arena_is_replaced_by_one_at_least_twice_its_size() -> None:
    assert arena_size(int(3.5 * GB), 3 * GB, 100 * GB) == 6 * GB
    assert arena_size(9 * GB, 3 * GB, 100 * GB) == 9 * GB  # needed beyond double: needed


def test_doubling_stops_at_the_room_the_device_has() -> None:
    assert arena_size(int(3.5 * GB), 3 * GB, 18 * GB) == int(3.5 * GB)  # a sixth: 3 GB
    assert arena_size(int(3.5 * GB), 3 * GB, 24 * GB) == 4 * GB


def test_what_growth_keeps_stays_under_the_newest_arena() -> None:
    sizes, size = [], 1 * GB
    for needed in range(2, 40):  # a pool made again, a little larger each time
        made = arena_size(needed * GB // 2, size, 1000 * GB)
        if made is not None:
            sizes.append(size)
            size = made
    assert sum(sizes) < size and len(sizes) <= 5


def test_an_arena_takes_whole_granules() -> None:
    """A VMM allocation is made and mapped in whole granules (the driver's, 2 MiB on the GPUs
    seen so far): the size the runner maps is the rounded one, and holds one buffer at least."""
    from cudal1_evaluator.wire.cuda_ipc import ALIGN, granular

    granule = 2 << 20
    assert granular(0, granule) == granular(1, granule) == granular(granule, granule) == granule
    assert granular(granule + 1, granule) == 2 * granule
    assert granular(0, 64) == ALIGN  # a granule smaller than a buffer's room: that room


def test_an_address_unmapped_is_forgotten_by_whom_it_was_mapped() -> None:
    """Round 22: past ``MAX_OPEN`` mappings the oldest are closed, and the driver may map a
    later allocation at a freed address; the runner it was mapped for must not stay its
    owner there (an honest output at that address would be refused)."""
    import torch

    from cudal1_evaluator.trusted.sealing import Placer

    class Trimming:
        def trim(self, keep: set[bytes]) -> list[int]:
            return [0x1000]

    placer = Placer(torch.device("cpu"))
    placer.mapper = Trimming()  # type: ignore[assignment]
    placer.mapped_by = {0x1000: 1, 0x2000: 0}
    placer.forget(set())
    assert placer.mapped_by == {0x2000: 0}

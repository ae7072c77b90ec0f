"""How a runner's device arena is sized when its pool is made again (``referee.arena_size``):
one that fits is used again; an outgrown one is kept (CUDA leaves freeing memory another
process maps undefined), so a new one at least doubles where the device has room."""

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


def test_an_arena_takes_whole_memory_objects() -> None:
    """A handle's offset can be forged (round 23), so an arena shares its driver memory
    object with no other allocation: its size is rounded up to whole 2 MiB objects."""
    from cudal1_evaluator.wire.cuda_ipc import OBJECT_BYTES, whole_objects

    assert OBJECT_BYTES == 2 << 20
    assert whole_objects(0) == whole_objects(1) == whole_objects(OBJECT_BYTES) == OBJECT_BYTES
    assert whole_objects(OBJECT_BYTES + 1) == 2 * OBJECT_BYTES


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

import torch

from DLStudio.model.kv_cache import KeyValueCache

SOS_INDEX, EOS_INDEX = 0, 1


class MyCache(KeyValueCache):
    def extend(self, K, V):
        if self.K is not None:
            K = torch.cat([self.K, K], dim=2)
            V = torch.cat([self.V, V], dim=2)
        self.K, self.V = K, V
        return K, V


@torch.no_grad()
def greedy_decode(model, src, max_len):
    memory, cross_mask = model.encode(src)
    B = src.size(0)
    ys = torch.full((B, 1), SOS_INDEX, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    with model.decoding(MyCache):
        for _ in range(max_len - 1):
            word = model.decode_newest(ys, memory, cross_mask).argmax(dim=-1)
            word = word.masked_fill(done, EOS_INDEX)
            ys = torch.cat([ys, word[:, None]], dim=1)
            done |= word == EOS_INDEX
            if done.all():
                break
    return ys[:, 1:]

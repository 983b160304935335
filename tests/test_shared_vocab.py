"""--shared-vocab: one BPE vocabulary learnt from both languages, and one matrix for the
encoder's embeddings, the decoder's and the output layer. The tied model's gradient is the sum
of the three an untied model of the same numbers gets; a checkpoint rebuilds the one matrix;
what cannot go with it is refused with the reason."""

import pytest

from DLStudio import DLStudio, TransformerFG
from DLStudio.data import generate_corpus
from DLStudio.data.vocabulary import build_vocabulary

from .close import assert_close

CORPUS = generate_corpus(300, seed=3)


def container(**options):
    dls = DLStudio(use_gpu=False, batch_size=16, epochs=1, seed=2)
    x = TransformerFG(dl_studio=dls, corpus=CORPUS, embedding_size=16, num_warmup_steps=10,
                      tokenizer="bpe", vocab_size=400, **options)
    return dls, x, x.encoder_decoder(1, 1, 2)


def test_one_tokenizer_reads_both_languages():
    train = CORPUS.pairs[:250]
    vocab = build_vocabulary(CORPUS, train, "bpe", 400, shared=True)
    assert vocab.vocab_en_size == vocab.vocab_es_size == 400
    assert vocab.tokenizers["en"] is vocab.tokenizers["es"]
    # a Spanish sentence is pieces of the one vocabulary whichever side reads it
    es = train[0][1]
    assert vocab.token_ids([es], "en") == vocab.token_ids([es], "es")
    apart = build_vocabulary(CORPUS, train, "bpe", 400)
    assert apart.token_ids([es], "en") != apart.token_ids([es], "es")


def test_three_uses_one_matrix_and_its_gradient_is_their_sum():
    _, x, tied = container(shared_vocab=True)
    W = tied.embeddings_generator_en.embedding.weight
    assert tied.embeddings_generator_es.embedding.weight is W
    assert tied.decoder.out.weight is W
    _, _, apart = container(vocab=x.vocab)      # the same tokens, three matrices
    V, M = W.shape
    assert (sum(p.numel() for p in apart.parameters())
            - sum(p.numel() for p in tied.parameters())) == 2 * V * M
    # the untied model with the same numbers everywhere: its three gradients add up to ours
    apart.load_state_dict(tied.state_dict())
    src = x.vocab.encode([p[0] for p in CORPUS.pairs[:8]], "en")
    tgt = x.vocab.encode([p[1] for p in CORPUS.pairs[:8]], "es")
    for model in (tied, apart):
        model.zero_grad()
        loss, _ = model.loss(src, tgt)
        loss.backward()
    three = (apart.embeddings_generator_en.embedding.weight.grad
             + apart.embeddings_generator_es.embedding.weight.grad
             + apart.decoder.out.weight.grad)
    assert_close(W.grad, three)
    assert apart.decoder.out.weight.grad.abs().sum() > 0


@pytest.mark.slow
def test_a_checkpoint_rebuilds_the_one_matrix_and_translates_the_same(tmp_path, capsys):
    from DLStudio.cli.translation import train_main, translate_main
    assert train_main("FG", ["--archive", "bundled", "--tokenizer", "bpe", "--shared-vocab",
                       "--vocab-size", "400", "--embedding-size", "16", "--num-layers", "1",
                       "--num-atten-heads", "2", "--max-steps", "8", "--batch-size", "16",
                       "--checkpoints-dir", str(tmp_path / "ck"), "--no-eval",
                       "--ema"]) == 0
    assert "one vocabulary of 400 BPE pieces for both languages" in capsys.readouterr().out
    path = str(next((tmp_path / "ck").glob("checkpoint_*.pt")))
    for weights in ("raw", "average"):
        _, model, _ = TransformerFG.from_checkpoint(path, weights=weights)
        W = model.embeddings_generator_en.embedding.weight
        assert model.embeddings_generator_es.embedding.weight is W
        assert model.decoder.out.weight is W
    xformer, model, _ = TransformerFG.from_checkpoint(path)
    from DLStudio.evaluation.decode_and_score import translate_sentences
    expected = translate_sentences(model, xformer.vocab, ["she will eat the red apples"])[0]
    assert translate_main([path, "she will eat the red apples"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == expected


def test_what_cannot_share_is_refused_with_the_reason(tmp_path, capsys):
    from DLStudio.cli.translation import train_main
    with pytest.raises(ValueError, match="tokenizer='bpe'"):
        TransformerFG(dl_studio=DLStudio(use_gpu=False), corpus=CORPUS, shared_vocab=True)
    assert train_main("FG", ["--archive", "bundled", "--shared-vocab", "--max-steps", "1",
                       "--checkpoints-dir", str(tmp_path / "a")]) != 0
    assert "--tokenizer bpe --shared-vocab" in capsys.readouterr().err
    gpt = tmp_path / "gpt.pt"
    gpt.write_bytes(b"")                    # refused before any checkpoint is read
    assert train_main("FG", ["--archive", "bundled", "--tokenizer", "bpe", "--shared-vocab",
                       "--init-decoder-from", str(tmp_path), "--max-steps", "1",
                       "--checkpoints-dir", str(tmp_path / "b")]) != 0
    err = capsys.readouterr().err
    assert "--init-decoder-from and --shared-vocab do not go together" in err
    assert "Traceback" not in err

"""A deterministic English-to-Spanish sentence generator: the project's bundled corpus.

It writes sentences from a small grammar so that the demo and the tests can show a
Transformer learning real structure in minutes on a CPU, with no external data:

- subjects: pronouns (i, you, he, she, we, they) or noun phrases of people and animals;
- noun phrases: determiner (the, a, some, my, your, his, her, our, their, this, that,
  these, those, two ... ten) + optional adjective + noun; Spanish articles, possessives and
  demonstratives agree with the noun in gender and number, adjectives follow the noun and
  agree with it, English picks "a" or "an";
- verbs: regular -ar/-er/-ir verbs, stem-changing verbs (encontrar, cerrar, dormir, pedir,
  jugar ...), spelling changes (busqué, llegué), and irregulars (ir, estar, tener, hacer,
  querer, ver, traer, venir, oír, seguir);
- three tenses (present, preterite, future), each with time adverbs that fit it;
- affirmative, negative ("do not" / "no") and yes/no questions (do-support in English,
  verb before subject in Spanish); the personal "a" (and "al") before people and animals.

``generate_pairs(n, seed)`` always returns the same pairs for the same arguments.
"""

import random

from .archive import build_corpus

__all__ = ["generate_pairs", "generate_corpus", "conjugate", "noun_phrase", "Noun", "Verb"]

MAX_WORDS = 8
PERSONS = ("1s", "2s", "3s", "1p", "3p")

# ---------------------------------------------------------------------------------------
# The lexicon. Nouns: English singular/plural, Spanish singular/plural, gender, category
# (a "-" plural marks a mass noun, used in the singular only).
_NOUNS = """
man men hombre hombres m person|woman women mujer mujeres f person|boy boys niño niños m person
girl girls niña niñas f person|brother brothers hermano hermanos m person
sister sisters hermana hermanas f person|father fathers padre padres m person
mother mothers madre madres f person|son sons hijo hijos m person
daughter daughters hija hijas f person|uncle uncles tío tíos m person
aunt aunts tía tías f person|grandfather grandfathers abuelo abuelos m person
grandmother grandmothers abuela abuelas f person|friend friends amigo amigos m person
king kings rey reyes m person|queen queens reina reinas f person
doctor doctors médico médicos m person|nurse nurses enfermera enfermeras f person
student students estudiante estudiantes m person|neighbor neighbors vecino vecinos m person
cook cooks cocinero cocineros m person|farmer farmers granjero granjeros m person
waiter waiters camarero camareros m person|actor actors actor actores m person
actress actresses actriz actrices f person|baby babies bebé bebés m person
singer singers cantante cantantes m person|pilot pilots piloto pilotos m person
lawyer lawyers abogado abogados m person|soldier soldiers soldado soldados m person
writer writers escritor escritores m person|painter painters pintor pintores m person
dancer dancers bailarina bailarinas f person|guest guests invitado invitados m person
boss bosses jefe jefes m person|cousin cousins primo primos m person
husband husbands esposo esposos m person|wife wives esposa esposas f person
dog dogs perro perros m animal|cat cats gato gatos m animal|horse horses caballo caballos m animal
cow cows vaca vacas f animal|bird birds pájaro pájaros m animal|mouse mice ratón ratones m animal
rabbit rabbits conejo conejos m animal|duck ducks pato patos m animal|pig pigs cerdo cerdos m animal
lion lions león leones m animal|bear bears oso osos m animal|monkey monkeys mono monos m animal
hen hens gallina gallinas f animal|fox foxes zorro zorros m animal|wolf wolves lobo lobos m animal
frog frogs rana ranas f animal|snake snakes serpiente serpientes f animal
elephant elephants elefante elefantes m animal|tiger tigers tigre tigres m animal
goat goats cabra cabras f animal|turtle turtles tortuga tortugas f animal
apple apples manzana manzanas f food|cake cakes pastel pasteles m food
orange oranges naranja naranjas f food|banana bananas plátano plátanos m food
egg eggs huevo huevos m food|cheese cheeses queso quesos m food|soup soups sopa sopas f food
cookie cookies galleta galletas f food|potato potatoes patata patatas f food
tomato tomatoes tomate tomates m food|carrot carrots zanahoria zanahorias f food
pear pears pera peras f food|lemon lemons limón limones m food|grape grapes uva uvas f food
strawberry strawberries fresa fresas f food|pie pies tarta tartas f food
salad salads ensalada ensaladas f food|onion onions cebolla cebollas f food
pizza pizzas pizza pizzas f food|cherry cherries cereza cerezas f food
peach peaches melocotón melocotones m food|sausage sausages salchicha salchichas f food
bread - pan - m food|rice - arroz - m food|milk - leche - f drink|juice - zumo - m drink
coffee - café - m drink|tea - té - m drink|wine - vino - m drink|beer - cerveza - f drink
lemonade - limonada - f drink|soda - refresco - m drink
book books libro libros m text|letter letters carta cartas f text
newspaper newspapers periódico periódicos m text|magazine magazines revista revistas f text
story stories cuento cuentos m text|poem poems poema poemas m text|note notes nota notas f text
message messages mensaje mensajes m text|novel novels novela novelas f text
report reports informe informes m text|song songs canción canciones f text
car cars coche coches m thing|door doors puerta puertas f thing
window windows ventana ventanas f thing
table tables mesa mesas f thing|chair chairs silla sillas f thing|box boxes caja cajas f thing
bag bags bolsa bolsas f thing|key keys llave llaves f thing
bicycle bicycles bicicleta bicicletas f thing|ball balls pelota pelotas f thing
pen pens bolígrafo bolígrafos m thing|pencil pencils lápiz lápices m thing
phone phones teléfono teléfonos m thing|computer computers ordenador ordenadores m thing
clock clocks reloj relojes m thing|lamp lamps lámpara lámparas f thing|cup cups taza tazas f thing
glass glasses vaso vasos m thing|plate plates plato platos m thing|bed beds cama camas f thing
shirt shirts camisa camisas f thing|dress dresses vestido vestidos m thing
hat hats sombrero sombreros m thing|shoe shoes zapato zapatos m thing
picture pictures cuadro cuadros m thing|camera cameras cámara cámaras f thing
guitar guitars guitarra guitarras f thing|piano pianos piano pianos m thing
toy toys juguete juguetes m thing|boat boats barco barcos m thing|train trains tren trenes m thing
bottle bottles botella botellas f thing|knife knives cuchillo cuchillos m thing
spoon spoons cuchara cucharas f thing|fork forks tenedor tenedores m thing
mirror mirrors espejo espejos m thing|blanket blankets manta mantas f thing
ring rings anillo anillos m thing|coat coats abrigo abrigos m thing
sock socks calcetín calcetines m thing|basket baskets cesta cestas f thing
flower flowers flor flores f thing|gift gifts regalo regalos m thing
ticket tickets billete billetes m thing|wallet wallets cartera carteras f thing
candle candles vela velas f thing|towel towels toalla toallas f thing
pillow pillows almohada almohadas f thing|rope ropes cuerda cuerdas f thing
house houses casa casas f place|park parks parque parques m place
school schools escuela escuelas f place
market markets mercado mercados m place|beach beaches playa playas f place
library libraries biblioteca bibliotecas f place|city cities ciudad ciudades f place
office offices oficina oficinas f place|church churches iglesia iglesias f place
hospital hospitals hospital hospitales m place
restaurant restaurants restaurante restaurantes m place
station stations estación estaciones f place|museum museums museo museos m place
store stores tienda tiendas f place|bank banks banco bancos m place
airport airports aeropuerto aeropuertos m place|garden gardens jardín jardines m place
river rivers río ríos m place|lake lakes lago lagos m place
mountain mountains montaña montañas f place
village villages pueblo pueblos m place|farm farms granja granjas f place
forest forests bosque bosques m place|theater theaters teatro teatros m place
hotel hotels hotel hoteles m place|bridge bridges puente puentes m place
"""

# Places take "in" unless listed here with "at".
_AT_PLACES = {"beach", "station", "airport", "market", "bank"}
_OPENABLE = {"door", "window", "box", "bag", "book", "letter", "bottle", "novel", "magazine",
             "newspaper", "report", "message", "note", "wallet", "basket"}
_INSTRUMENTS = {"guitar", "piano"}
_DISHES = {"cake", "soup", "salad", "pizza", "pie", "bread", "rice"}
# Verbs an animal may be the subject of; people may be the subject of any verb.
_ANIMAL_VERBS = {"comer", "beber", "querer", "encontrar", "perder", "ver", "mirar", "oír",
                 "atrapar", "seguir", "dormir", "correr", "nadar", "caminar", "jugar",
                 "esperar", "vivir", "ir", "venir", "volver", "llegar", "odiar", "amar"}

# Adjectives: English, Spanish masculine singular, and the noun categories they describe.
_ADJECTIVES = """
red rojo thing food|blue azul thing|green verde thing food|yellow amarillo thing food
black negro thing animal|white blanco thing animal|gray gris thing animal|brown marrón thing animal
purple morado thing|big grande thing animal place|small pequeño thing animal place
new nuevo thing place text|old viejo thing place person animal text|long largo thing text
heavy pesado thing|cheap barato thing food drink|expensive caro thing food drink
beautiful bonito thing place text|ugly feo thing animal place|clean limpio thing place
dirty sucio thing place|broken roto thing|tall alto person|short bajo person
young joven person animal|happy feliz person animal|sad triste person animal text
kind amable person|rich rico person|poor pobre person|strong fuerte person animal
weak débil person animal|lazy perezoso person animal|smart inteligente person animal
funny gracioso person animal text|brave valiente person animal|quiet tranquilo place animal
famous famoso person place text|friendly simpático person animal|fat gordo animal
thin delgado person animal|fresh fresco food drink|sweet dulce food drink
hot caliente food drink|cold frío food drink|delicious delicioso food drink
modern moderno place thing|empty vacío place thing|short corto text|boring aburrido text
"""

# States for "to be" (estar): English, Spanish masculine singular.
_STATES = """tired cansado|happy contento|sad triste|sick enfermo|busy ocupado|angry enfadado
ready listo|bored aburrido|worried preocupado|nervous nervioso|calm tranquilo
awake despierto|asleep dormido|hungry hambriento|lost perdido|alone solo"""

# Verbs, one a line: English base/3rd singular/past, Spanish infinitive, what follows it:
# noun categories for the object, "open" and "instrument" for those sets, "loc" for an
# optional "in/at PLACE", "to" for "to PLACE".
_VERBS = """
eat/eats/ate comer food,loc
drink/drinks/drank beber drink,loc
buy/buys/bought comprar food,drink,thing,text
sell/sells/sold vender food,thing,animal
cook/cooks/cooked cocinar food
want/wants/wanted querer food,drink,thing,text,animal
need/needs/needed necesitar thing,food,drink
wash/washes/washed lavar thing,animal
clean/cleans/cleaned limpiar thing,place
open/opens/opened abrir open
close/closes/closed cerrar open
break/breaks/broke romper thing
find/finds/found encontrar thing,animal,text,person
lose/loses/lost perder thing,text
bring/brings/brought traer food,drink,thing,text
carry/carries/carried llevar thing
see/sees/saw ver person,animal,thing,place
watch/watches/watched mirar person,animal,thing
paint/paints/painted pintar thing,place
draw/draws/drew dibujar animal,thing,place,person
write/writes/wrote escribir text
send/sends/sent enviar text,thing
receive/receives/received recibir text,thing
look for/looks for/looked for buscar thing,animal,person
visit/visits/visited visitar person,place
help/helps/helped ayudar person
call/calls/called llamar person,animal
love/loves/loved amar person,animal
hate/hates/hated odiar food,animal
hear/hears/heard oír person,animal
make/makes/made hacer dish
have/has/had tener thing,animal,text
use/uses/used usar thing
play/plays/played tocar instrument
order/orders/ordered pedir food,drink
share/shares/shared compartir food,drink,text,thing
fix/fixes/fixed arreglar thing
catch/catches/caught atrapar animal
follow/follows/followed seguir person,animal
take/takes/took tomar food,drink,thing
sleep/sleeps/slept dormir loc
run/runs/ran correr loc
swim/swims/swam nadar loc
work/works/worked trabajar loc
dance/dances/danced bailar loc
sing/sings/sang cantar loc
walk/walks/walked caminar loc
play/plays/played jugar loc
study/studies/studied estudiar loc
wait/waits/waited esperar loc
live/lives/lived vivir in
go/goes/went ir to
come/comes/came venir to
return/returns/returned volver to
arrive/arrives/arrived llegar to
"""

# Full irregular tables (yo, tú, él, nosotros, ellos); None keeps the regular tense.
_IRREGULAR = {
    "ir": (["voy", "vas", "va", "vamos", "van"],
           ["fui", "fuiste", "fue", "fuimos", "fueron"], None),
    "estar": (["estoy", "estás", "está", "estamos", "están"],
              ["estuve", "estuviste", "estuvo", "estuvimos", "estuvieron"], None),
    "tener": (["tengo", "tienes", "tiene", "tenemos", "tienen"],
              ["tuve", "tuviste", "tuvo", "tuvimos", "tuvieron"], "tendr"),
    "hacer": (["hago", "haces", "hace", "hacemos", "hacen"],
              ["hice", "hiciste", "hizo", "hicimos", "hicieron"], "har"),
    "querer": (["quiero", "quieres", "quiere", "queremos", "quieren"],
               ["quise", "quisiste", "quiso", "quisimos", "quisieron"], "querr"),
    "ver": (["veo", "ves", "ve", "vemos", "ven"], ["vi", "viste", "vio", "vimos", "vieron"], None),
    "traer": (["traigo", "traes", "trae", "traemos", "traen"],
              ["traje", "trajiste", "trajo", "trajimos", "trajeron"], None),
    "venir": (["vengo", "vienes", "viene", "venimos", "vienen"],
              ["vine", "viniste", "vino", "vinimos", "vinieron"], "vendr"),
    "oír": (["oigo", "oyes", "oye", "oímos", "oyen"], ["oí", "oíste", "oyó", "oímos", "oyeron"],
            "oir"),
    "seguir": (["sigo", "sigues", "sigue", "seguimos", "siguen"],
               ["seguí", "seguiste", "siguió", "seguimos", "siguieron"], None),
    "enviar": (["envío", "envías", "envía", "enviamos", "envían"], None, None),
}
# Present-tense stem changes (all persons but nosotros), and -ir preterite changes (3rd).
_STEM_CHANGE = {"encontrar": ("o", "ue"), "cerrar": ("e", "ie"), "perder": ("e", "ie"),
                "dormir": ("o", "ue"), "pedir": ("e", "i"), "jugar": ("u", "ue"),
                "volver": ("o", "ue")}
_PRETERITE_3RD_CHANGE = {"dormir": ("o", "u"), "pedir": ("e", "i")}

_ENDINGS = {
    "present": {"ar": ["o", "as", "a", "amos", "an"], "er": ["o", "es", "e", "emos", "en"],
                "ir": ["o", "es", "e", "imos", "en"]},
    "past": {"ar": ["é", "aste", "ó", "amos", "aron"], "er": ["í", "iste", "ió", "imos", "ieron"],
             "ir": ["í", "iste", "ió", "imos", "ieron"]},
}
_FUTURE_ENDINGS = ["é", "ás", "á", "emos", "án"]

_ADVERBS = {
    "present": [("now", "ahora"), ("today", "hoy"), ("every day", "todos los días")],
    "past": [("yesterday", "ayer"), ("last night", "anoche"), ("last week", "la semana pasada"),
             ("last year", "el año pasado")],
    "future": [("tomorrow", "mañana"), ("tonight", "esta noche"),
               ("next week", "la próxima semana"), ("next year", "el próximo año")],
}

_PRONOUNS = {"1s": ("i", "yo"), "2s": ("you", "tú"), "3s": (("he", "él"), ("she", "ella")),
             "1p": ("we", "nosotros"), "3p": ("they", "ellos")}


_DETERMINERS = {  # English singular, English plural, Spanish m sg, f sg, m pl, f pl
    "the": ("the", "the", "el", "la", "los", "las"),
    "a": ("a", "some", "un", "una", "algunos", "algunas"),
    "my": ("my", "my", "mi", "mi", "mis", "mis"),
    "your": ("your", "your", "tu", "tu", "tus", "tus"),
    "his": ("his", "his", "su", "su", "sus", "sus"),
    "her": ("her", "her", "su", "su", "sus", "sus"),
    "our": ("our", "our", "nuestro", "nuestra", "nuestros", "nuestras"),
    "their": ("their", "their", "su", "su", "sus", "sus"),
    "this": ("this", "these", "este", "esta", "estos", "estas"),
    "that": ("that", "those", "ese", "esa", "esos", "esas"),
}
_NUMBERS = [("two", "dos"), ("three", "tres"), ("four", "cuatro"), ("five", "cinco"),
            ("six", "seis"), ("seven", "siete"), ("eight", "ocho"), ("nine", "nueve"),
            ("ten", "diez")]
_ADJ_PLURALS = {"joven": "jóvenes", "marrón": "marrones"}


class Noun:
    """A noun: English singular/plural, Spanish singular/plural, gender, category."""

    def __init__(self, line):
        en, en_pl, es, es_pl, self.gender, self.category = line.split()
        self.en, self.es = en, es
        self.en_pl = None if en_pl == "-" else en_pl   # None: a mass noun (milk, rice)
        self.es_pl = None if es_pl == "-" else es_pl

    @property
    def animate(self):
        return self.category in ("person", "animal")


class Verb:
    """A verb: English base/3rd singular/past, Spanish infinitive, what may follow it."""

    def __init__(self, line):
        english, self.es, takes = line.rsplit(" ", 2)
        self.base, self.third, self.past = english.split("/")
        self.takes = takes.split(",")


def _items(block):
    return [item.strip() for item in block.replace("\n", "|").split("|") if item.strip()]


NOUNS = [Noun(item) for item in _items(_NOUNS)]
VERBS = [Verb(line) for line in _VERBS.strip().splitlines()]
ADJECTIVES = [(item.split()[0], item.split()[1], set(item.split()[2:]))
              for item in _items(_ADJECTIVES)]
STATES = [tuple(item.split()) for item in _items(_STATES)]


# ---------------------------------------------------------------------------------------
# Spanish morphology.
def conjugate(infinitive, tense, person):
    """Spanish form of ``infinitive`` in ``tense`` ("present" | "past" | "future") for
    ``person`` in ``PERSONS``: ``conjugate("encontrar", "present", "1s") == "encuentro"``."""
    p = PERSONS.index(person)
    table = _IRREGULAR.get(infinitive)
    if tense == "future":
        stem = table[2] if table and table[2] else infinitive
        if infinitive == "oír":
            stem = "oir"
        return stem + _FUTURE_ENDINGS[p]
    if table and table[0 if tense == "present" else 1]:
        return table[0 if tense == "present" else 1][p]
    stem, group = infinitive[:-2], infinitive[-2:]
    ending = _ENDINGS[tense][group][p]
    if tense == "present" and infinitive in _STEM_CHANGE and person != "1p":
        old, new = _STEM_CHANGE[infinitive]
        i = stem.rindex(old)
        stem = stem[:i] + new + stem[i + 1:]
    if tense == "past":
        if person == "1s" and group == "ar":  # busqué, llegué, empecé: keep the sound
            for end, repl in (("c", "qu"), ("g", "gu"), ("z", "c")):
                if stem.endswith(end):
                    stem = stem[: -len(end)] + repl
                    break
        if person in ("3s", "3p") and infinitive in _PRETERITE_3RD_CHANGE:
            old, new = _PRETERITE_3RD_CHANGE[infinitive]
            i = stem.rindex(old)
            stem = stem[:i] + new + stem[i + 1:]
    return stem + ending


def adjective_form(masculine, gender, plural):
    """Spanish adjective agreeing with a noun: ``adjective_form("rojo", "f", True) ==
    "rojas"``; ``adjective_form("feliz", "m", True) == "felices"``."""
    form = masculine
    if gender == "f" and masculine.endswith("o"):
        form = masculine[:-1] + "a"
    if not plural:
        return form
    if masculine in _ADJ_PLURALS:
        return _ADJ_PLURALS[masculine]
    if form[-1] in "aeiouáéíóú":
        return form + "s"
    if form.endswith("z"):
        return form[:-1] + "ces"
    return form + "es"


def _a_or_an(next_word):
    return "an" if next_word[0] in "aeiou" else "a"


def noun_phrase(noun, det, plural, adjective=None, number=None):
    """English and Spanish word lists for a noun phrase.

    Args:
        noun: a ``Noun``; det: a key of the determiner table (ignored when ``number`` is
        given); plural: bool; adjective: ``(english, spanish masculine)`` or None;
        number: ``(english, spanish)`` numeral for a plural, or None.
    """
    en_noun = noun.en_pl if plural else noun.en
    es_noun = noun.es_pl if plural else noun.es
    en_adj = [adjective[0]] if adjective else []
    es_adj = [adjective_form(adjective[1], noun.gender, plural)] if adjective else []
    if number:
        en_det, es_det = number
    else:
        forms = _DETERMINERS[det]
        en_det = forms[1] if plural else forms[0]
        es_det = forms[2 + (noun.gender == "f") + 2 * plural]
        if en_det == "a":
            en_det = _a_or_an((en_adj + [en_noun])[0])
    return [en_det] + en_adj + [en_noun], [es_det] + [es_noun] + es_adj


def _with_a(es_words):
    """Spanish "a" before a phrase, with "a el" contracted to "al"."""
    return ["al"] + es_words[1:] if es_words[0] == "el" else ["a"] + es_words


# ---------------------------------------------------------------------------------------
# Sentences.
class _Generator:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.by_category = {}
        for noun in NOUNS:
            self.by_category.setdefault(noun.category, []).append(noun)
        self.by_category["open"] = [n for n in NOUNS if n.en in _OPENABLE]
        self.by_category["instrument"] = [n for n in NOUNS if n.en in _INSTRUMENTS]
        self.by_category["dish"] = [n for n in NOUNS if n.en in _DISHES]

    def phrase(self, nouns, allow_plural=True, subject=False):
        rng = self.rng
        noun = rng.choice(nouns)
        plural = allow_plural and noun.en_pl is not None and rng.random() < 0.4
        number = rng.choice(_NUMBERS) if plural and rng.random() < 0.25 else None
        dets = [d for d in _DETERMINERS if noun.en_pl is not None or d != "a"]
        det = rng.choice(dets if not subject else [d for d in dets if d != "a"])
        fitting = [(en, es) for en, es, cats in ADJECTIVES if noun.category in cats]
        adjective = rng.choice(fitting) if fitting and rng.random() < 0.4 else None
        en, es = noun_phrase(noun, det, plural, adjective, number)
        return noun, plural, en, es

    def subject(self, verb=None):
        """(person, gender, english words, spanish words); an animal only for a verb
        animals do."""
        rng = self.rng
        if rng.random() < 0.55:
            person = rng.choice(PERSONS)
            forms = _PRONOUNS[person]
            gender = "m"
            if person == "3s":
                forms = rng.choice(forms)
                gender = "f" if forms[0] == "she" else "m"
            return person, gender, [forms[0]], [forms[1]]
        animate = self.by_category["person"]
        if verb is None or verb.es in _ANIMAL_VERBS:
            animate = animate + self.by_category["animal"]
        noun, plural, en, es = self.phrase(animate, subject=True)
        return ("3p" if plural else "3s"), noun.gender, en, es

    def complement(self, verb):
        """English and Spanish words after the verb."""
        rng = self.rng
        objects = [c for c in verb.takes if c not in ("loc", "to", "in")]
        if objects and ("loc" not in verb.takes or rng.random() < 0.7):
            pool = [n for c in objects for n in self.by_category[c]]
            noun, _, en, es = self.phrase(pool)
            return en, (_with_a(es) if noun.animate else es)
        if "to" in verb.takes or "in" in verb.takes or rng.random() < 0.6:
            noun, _, en, es = self.phrase(self.by_category["place"], allow_plural=False)
            if "to" in verb.takes:
                return ["to"] + en, _with_a(es)
            return ["at" if noun.en in _AT_PLACES else "in"] + en, ["en"] + es
        return [], []

    def sentence(self):
        """(english, spanish, labels): labels say what was drawn ({"tense": "present" |
        "past" | "future", "negation": "yes" | "no", "question": "yes" | "no"}); the
        tasks of DLStudio.data.tasks are made of them."""
        rng = self.rng
        tense = rng.choice(("present", "past", "future"))
        mode = rng.choices(("yes", "no", "question"), weights=(2, 1, 1))[0]
        if rng.random() < 0.2:
            person, gender, subj_en, subj_es = self.subject()
            state_en, state_es = rng.choice(STATES)
            plural = person in ("1p", "3p")
            rest_en, rest_es = [state_en], [adjective_form(state_es, gender, plural)]
            verb_en = _be(tense, mode, person)
            verb_es = conjugate("estar", tense, person)
        else:
            verb = rng.choice(VERBS)
            person, gender, subj_en, subj_es = self.subject(verb)
            rest_en, rest_es = self.complement(verb)
            verb_en = _do(verb, tense, mode, person)
            verb_es = conjugate(verb.es, tense, person)
        if rng.random() < 0.5:
            adverb_en, adverb_es = rng.choice(_ADVERBS[tense])
            rest_en, rest_es = rest_en + adverb_en.split(), rest_es + adverb_es.split()
        if mode == "question":
            english = verb_en[0] + subj_en + verb_en[1] + rest_en
            spanish = [verb_es] + subj_es + rest_es
        else:
            english = subj_en + verb_en[0] + verb_en[1] + rest_en
            spanish = subj_es + (["no"] if mode == "no" else []) + [verb_es] + rest_es
        labels = {"tense": tense, "negation": "yes" if mode == "no" else "no",
                  "question": "yes" if mode == "question" else "no"}
        return " ".join(english), " ".join(spanish), labels


def _do(verb, tense, mode, person):
    """English verb words as (before subject, after subject) for a question, or
    (words, []) otherwise."""
    third = person == "3s"
    if mode == "yes":
        word = {"present": verb.third if third else verb.base, "past": verb.past,
                "future": "will " + verb.base}[tense]
        return word.split(), []
    aux = {"present": "does" if third else "do", "past": "did", "future": "will"}[tense]
    if mode == "no":
        return [aux, "not"] + verb.base.split(), []
    return [aux], verb.base.split()


def _be(tense, mode, person):
    """English forms of "to be", split like ``_do``."""
    present = {"1s": "am", "3s": "is"}.get(person, "are")
    past = "was" if person in ("1s", "3s") else "were"
    if tense == "future":
        if mode == "question":
            return ["will"], ["be"]
        return (["will", "not", "be"] if mode == "no" else ["will", "be"]), []
    word = present if tense == "present" else past
    if mode == "question":
        return [word], []
    return ([word, "not"] if mode == "no" else [word]), []


def generate_pairs(num_pairs=20000, seed=0, max_words=MAX_WORDS):
    """``num_pairs`` distinct (english, spanish) sentences of at most ``max_words`` words
    each, without SOS/EOS. The same arguments always give the same list."""
    return [(en, es) for en, es, _ in generate_labelled_pairs(num_pairs, seed, max_words)]


def generate_labelled_pairs(num_pairs=20000, seed=0, max_words=MAX_WORDS):
    """The pairs of `generate_pairs`, each with the labels of what its generator drew:
    (english, spanish, labels)."""
    gen, seen, pairs = _Generator(seed), set(), []
    tries = 0
    while len(pairs) < num_pairs:
        tries += 1
        if tries > 50 * num_pairs:
            raise RuntimeError(f"the grammar produced only {len(pairs)} distinct pairs")
        en, es, labels = gen.sentence()
        if len(en.split()) > max_words or len(es.split()) > max_words or (en, es) in seen:
            continue
        seen.add((en, es))
        pairs.append((en, es, labels))
    return pairs


def generate_corpus(num_pairs=20000, seed=0):
    """The generated pairs as a ``Corpus`` (SOS/EOS added, vocabularies built)."""
    return build_corpus(generate_pairs(num_pairs, seed), name=f"synthetic(seed={seed})")
